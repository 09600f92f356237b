package httpapi

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
)

// TokenVerifier checks an OIDC access token (auth.Verifier does, as /rpc's auth).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*auth.Principal, error)
}

var _ TokenVerifier = (*auth.Verifier)(nil)

// HandlerOptions configure a REST handler. A nil *HandlerOptions means defaults.
type HandlerOptions struct {
	// Logger receives internal errors (their text never reaches callers). Default
	// slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies; larger ones are refused with 413. Default: the
	// handler's own (see its NewHandler).
	MaxBodyBytes int64
	// Rate, when set, bounds each subject's requests once they are authenticated (a request
	// without a valid token is refused 401 first, and not counted); beyond it, 429. Share one
	// between surfaces for one budget per subject. Default: none.
	Rate *SubjectRate
	// Listings bounds the listings answered at once, and a page's bytes; share one between
	// surfaces for one budget. Default: a Listings of the surface's own, with its defaults.
	Listings *Listings
}

// Config describes one REST surface.
type Config struct {
	// Name says whose request failed in the log: "<Name> request failed".
	Name string
	// Verifier checks bearer tokens. Required.
	Verifier TokenVerifier
	// Classify maps an error of the surface's service to its HTTP status and a detail safe to
	// show the caller ("" when it has none). Default: fault.HTTPStatus and fault.Detail.
	Classify func(err error) (status int, detail string)
	// MaxBodyBytes is the body limit when HandlerOptions sets none. Default 1 MiB.
	MaxBodyBytes int64
}

// API answers the requests of one REST surface. It is safe for concurrent use.
type API struct {
	name     string
	verifier TokenVerifier
	classify func(error) (int, string)
	logger   *slog.Logger
	maxBody  int64
	rate     *SubjectRate // nil: unbounded
	listings *Listings
}

// New returns the API of the surface cfg describes, with the operator's opts.
func New(cfg Config, opts *HandlerOptions) *API {
	a := &API{name: cfg.Name, verifier: cfg.Verifier, classify: cfg.Classify, logger: slog.Default(), maxBody: cfg.MaxBodyBytes}
	if a.classify == nil {
		a.classify = func(err error) (int, string) { return fault.HTTPStatus(err), fault.Detail(err) }
	}
	if a.maxBody <= 0 {
		a.maxBody = 1 << 20
	}
	if opts != nil {
		if opts.Logger != nil {
			a.logger = opts.Logger
		}
		if opts.MaxBodyBytes > 0 {
			a.maxBody = opts.MaxBodyBytes
		}
		a.rate = opts.Rate
		a.listings = opts.Listings
	}
	if a.listings == nil {
		a.listings = NewListings(nil)
	}
	return a
}

// Listing takes a place for one listing of subject (Listings.Acquire): release it once the
// answer is written. pageBytes is the budget of the page's entries.
func (a *API) Listing(subject string) (release func(), pageBytes int, err error) {
	release, err = a.listings.Acquire(subject)
	return release, a.listings.PageBytes(), err
}

// Methods maps HTTP methods to the functions answering them for a caller of type C.
type Methods[C any] map[string]func(w http.ResponseWriter, r *http.Request, c C) error

// Route answers one path: HEAD as GET, a method missing from ms with 405 and Allow; then it
// authenticates the bearer token, spends a token of the subject's Rate (when set), turns the
// principal into the caller with as, calls the method's function and answers its error as a
// problem.
func Route[C any](a *API, as func(*auth.Principal) C, ms Methods[C]) http.Handler {
	methods := slices.Sorted(maps.Keys(ms))
	allow := slices.Clone(methods)
	if ms[http.MethodGet] != nil {
		allow = append(allow, http.MethodHead)
		slices.Sort(allow)
	}
	allowed := strings.Join(allow, ", ")
	return &methodHandler{methods: methods, serve: func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		f := ms[m]
		if f == nil {
			a.problem(w, r, &Error{Status: http.StatusMethodNotAllowed, Detail: r.Method + " is not allowed here",
				Header: http.Header{"Allow": {allowed}}})
			return
		}
		p, err := a.authenticate(r)
		if err == nil && a.rate != nil {
			err = a.rate.Admit(p.Subject)
		}
		if err == nil {
			err = f(w, r, as(p))
		}
		if err != nil {
			a.problem(w, r, err)
		}
	}}
}

// NotFound answers every request with 404: mount it where no route matches.
func (a *API) NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.problem(w, r, Errorf(http.StatusNotFound, "no such resource"))
	})
}

// authenticate verifies the request's bearer token: 401 without a valid one, 503 while tokens
// cannot be verified.
func (a *API) authenticate(r *http.Request) (*auth.Principal, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Detail: "an OIDC access token is required: Authorization: Bearer <token>",
			Header: http.Header{"Www-Authenticate": {"Bearer"}}}
	}
	p, err := a.verifier.Verify(r.Context(), token)
	if err != nil {
		if auth.Reason(err) == auth.ReasonUnavailable {
			a.logger.WarnContext(r.Context(), "token verification unavailable", "err", err)
			return nil, &Error{Status: http.StatusServiceUnavailable, Detail: "tokens cannot be verified right now",
				Header: http.Header{"Retry-After": {"5"}}}
		}
		return nil, &Error{Status: http.StatusUnauthorized, Detail: "the access token is not valid (" + auth.Reason(err) + ")",
			Header: http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}}}
	}
	return p, nil
}
