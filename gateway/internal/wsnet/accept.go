package wsnet

import (
	"errors"
	"net/http"
	"time"

	"github.com/ballet/gateway/gateway/internal/poller"
)

// Options adjust an Upgrader. A nil *Options means the defaults.
type Options struct {
	// FlushStall bounds a peer that does not read: what its socket did not take at once is sent
	// in chunks of 64 KiB, each of which it must take within FlushStall, or it is taken to be
	// gone and its connection fails, rather than holding a flusher until the heartbeat rule
	// notices (which a peer that sends but does not read never trips). Zero means 30 s.
	FlushStall time.Duration
	// PartialMessageBytes bounds the memory the Upgrader's connections hold together for
	// messages not yet whole (payload.go): the pieces of long frames being read, and the
	// messages of which a fragment but not the last has arrived. A connection whose next piece
	// would take the total past it is closed 1013 (try again later). Zero means no bound.
	PartialMessageBytes int64
	// PartialRefused, when set, runs as a connection is closed for PartialMessageBytes (on its
	// reader's goroutine).
	PartialRefused func()
}

const defaultFlushStall = 30 * time.Second

// AcceptOptions are one upgrade's: what the handshake offers and checks.
type AcceptOptions struct {
	// Subprotocols the server speaks, in its order of preference: the first the client
	// offers is chosen. None chosen is not an error: Transport.Subprotocol is then "".
	Subprotocols []string
	// OriginPatterns are the hosts (path.Match patterns, or scheme://host ones) whose pages
	// may open a connection besides the request's own host. A request without Origin (not
	// from a browser) is always let in.
	OriginPatterns []string
}

// Upgrader upgrades requests to WebSockets whose connections this package
// serves; the idle readers of its connections share one poller.
type Upgrader struct {
	poller  *poller.Poller
	stall   time.Duration
	partial partialBudget
}

// NewUpgrader returns an Upgrader with o.
func NewUpgrader(o *Options) *Upgrader {
	u := &Upgrader{poller: poller.New(), stall: defaultFlushStall}
	if o != nil && o.FlushStall > 0 {
		u.stall = o.FlushStall
	}
	if o != nil {
		u.partial.max, u.partial.refused = max(o.PartialMessageBytes, 0), o.PartialRefused
	}
	return u
}

// PartialBytes is the memory the Upgrader's connections hold for messages not yet whole,
// counted against Options.PartialMessageBytes.
func (u *Upgrader) PartialBytes() int64 { return u.partial.held.Load() }

// PartialBudget is Options.PartialMessageBytes as applied, 0 for no bound.
func (u *Upgrader) PartialBudget() int64 { return u.partial.max }

// Accept answers the opening handshake of RFC 6455 §4.2 and returns the connection's
// Transport, which carries nothing until Attach. When the request is not a WebSocket
// handshake it answers it (426, 405, 400, or 403 for an Origin it does not let in; see
// handshake.go) and returns the error. No extension is ever negotiated.
func (u *Upgrader) Accept(w http.ResponseWriter, r *http.Request, o *AcceptOptions) (*Transport, error) {
	if o == nil {
		o = &AcceptOptions{}
	}
	key, status, err := checkHandshake(w.Header(), r)
	if err == nil {
		status, err = checkOrigin(r, o.OriginPatterns)
	}
	if err != nil {
		http.Error(w, err.Error(), status)
		return nil, err
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, http.StatusText(http.StatusNotImplemented), http.StatusNotImplemented)
		return nil, errors.New("wsnet: the response writer cannot be hijacked")
	}
	sub, theirs := chooseSubprotocol(r.Header, o.Subprotocols)
	h := w.Header()
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Accept", acceptKey(key))
	if sub != "" {
		h.Set("Sec-WebSocket-Protocol", theirs)
	}
	w.WriteHeader(http.StatusSwitchingProtocols)
	c, brw, err := hj.Hijack() // sends the 101
	if err != nil {
		return nil, err
	}
	t := u.transport(c, brw)
	t.sub = sub
	return t, nil
}
