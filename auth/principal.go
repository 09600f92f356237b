package auth

import "time"

// Principal is an authenticated caller.
type Principal struct {
	// Subject is the token's "sub".
	Subject string
	// ClientID is the "client_id" claim, else "azp", else "".
	ClientID string
	// Human is true when Subject differs from ClientID. RFC 9068: a
	// client-credentials token has sub equal to the client id, so such a
	// caller is a service. A token without client_id and azp is human.
	Human bool
	// ExpiresAt is the token's "exp".
	ExpiresAt time.Time
	// IssuedAt is the token's "iat"; zero when the token has none.
	IssuedAt time.Time
}
