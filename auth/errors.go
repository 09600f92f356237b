package auth

import (
	"errors"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// ErrInvalidToken is wrapped by every error of Verifier.Verify.
var ErrInvalidToken = errors.New("auth: invalid token")

// Reasons a token is rejected, as returned by Reason.
const (
	ReasonMalformed      = "malformed"
	ReasonSignature      = "signature"
	ReasonIssuer         = "issuer"
	ReasonAudience       = "audience"
	ReasonExpired        = "expired"
	ReasonMissingSubject = "missing_subject"
	ReasonUnavailable    = "unavailable" // the issuer's key set could not be fetched
	ReasonUnknownKey     = "unknown_key" // of a key not in the set, refused before the next fetch
	ReasonSignedOut      = "signed_out"  // issued at or before an operator signed its subject out
	ReasonBlocked        = "blocked"     // an operator blocked its subject
	ReasonOther          = "other"
)

// Reasons lists every value Reason returns for a non-nil error, for
// initialising metric labels.
func Reasons() []string {
	return []string{ReasonMalformed, ReasonSignature, ReasonIssuer, ReasonAudience,
		ReasonExpired, ReasonMissingSubject, ReasonUnavailable, ReasonUnknownKey, ReasonSignedOut, ReasonBlocked, ReasonOther}
}

// Reason classifies an error of Verifier.Verify for metrics: one of the
// Reason* constants. It returns "" for nil and ReasonOther for errors that
// did not come from Verify.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var te *tokenError
	if errors.As(err, &te) {
		return te.reason
	}
	return ReasonOther
}

// tokenError is a rejected token: the class and the underlying cause.
type tokenError struct {
	reason string
	err    error
}

func (e *tokenError) Error() string {
	return "auth: invalid token (" + e.reason + "): " + e.err.Error()
}

func (e *tokenError) Unwrap() []error { return []error{ErrInvalidToken, e.err} }

func invalid(reason string, err error) error {
	return &tokenError{reason: reason, err: err}
}

// classify maps a go-oidc verification error to a reason. go-oidc types only
// the expiry error, so the others are recognised by their messages; the
// tests pin each class so a library upgrade that rewords one is caught.
func classify(err error) string {
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return ReasonExpired
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, errUnknownKey.Error()):
		return ReasonUnknownKey
	case strings.Contains(msg, "fetching keys"):
		return ReasonUnavailable
	case strings.Contains(msg, "failed to verify signature"),
		strings.Contains(msg, "failed to verify id token signature"):
		return ReasonSignature
	case strings.Contains(msg, "malformed jwt"),
		strings.Contains(msg, "failed to unmarshal claims"),
		strings.Contains(msg, "id token not signed"),
		strings.Contains(msg, "multiple signatures"):
		return ReasonMalformed
	case strings.Contains(msg, "issued by a different provider"):
		return ReasonIssuer
	case strings.Contains(msg, "expected audience"):
		return ReasonAudience
	}
	return ReasonOther
}
