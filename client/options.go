package client

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ballet/gateway/codec"
)

// TokenSource returns a fresh OIDC access token. It is called before every
// connection's auth and before every auth.refresh; returning the same token
// again is allowed (the connection then ends when that token expires).
type TokenSource func(ctx context.Context) (string, error)

// StaticToken is a TokenSource that always returns tok.
func StaticToken(tok string) TokenSource {
	return func(context.Context) (string, error) { return tok, nil }
}

// Options configure a Client. Token is required; a nil *Options is refused.
type Options struct {
	// Token supplies the access token. Required.
	Token TokenSource
	// Codec is the wire format. Default codec.MsgPack.
	Codec codec.Codec
	// Header is added to the WebSocket handshake request, and to every POST
	// over HTTP.
	Header http.Header
	// HTTPClient performs the handshake, and the POSTs over HTTP; its
	// Transport's DialContext is the place to change how TCP connections
	// are made. Its Timeout must be zero over HTTP, where a subscription's
	// response stays open. Default http.DefaultClient.
	HTTPClient *http.Client
	// Transport is how the connection is carried: TransportAuto (the
	// default) dials a WebSocket and falls back to HTTP when it does not
	// open (an upgrade refused or dropped in between); TransportWebSocket
	// never uses HTTP; TransportHTTP only HTTP (POST /rpc, JSON whatever
	// Codec says).
	Transport Transport
	// WebSocketRetry is, with TransportAuto, how long the client keeps to
	// HTTP after a WebSocket that did not open: its reconnects within that
	// time go over HTTP, the first one after it tries a WebSocket again. A working
	// connection over HTTP is not ended to try. Default 5 minutes.
	WebSocketRetry time.Duration
	// HeartbeatInterval is how often $/heartbeat is sent; three intervals
	// without any message from the server end the connection. Over HTTP
	// the client sends none, and only a response kept open (a subscription,
	// a planner watch) that is silent for three intervals ends it. Default: the
	// server's interval, as its auth result advertises it (heartbeat_ms),
	// or 15s from a server that advertises none. When set and the server
	// advertises another interval, heartbeats are sent at the shorter of
	// the two (the server closes a connection that is silent for three of
	// its intervals) and the connection is given up after three of the
	// longer (the server sends its heartbeats only every interval of its
	// own).
	HeartbeatInterval time.Duration
	// ConnectTimeout bounds one connection attempt: handshake and auth.
	// Default 10s.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles per
	// failed attempt from MinBackoff up to MaxBackoff, with full jitter.
	// A connection refused because its subject has too many (-32029 to
	// auth, close 4029) waits between MaxBackoff/2 and MaxBackoff, and so
	// do the attempts after it; a handshake refused with Retry-After (503
	// from a full replica) waits at least that long. Defaults 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// RateLimitRetries is how many times a request that the server refused
	// for a rate (-32029 with limit "requests", "subject_requests" or
	// "replay") is sent again, each time after the server's retry_after_ms
	// plus jitter; past them the call fails with a *LimitError. The server
	// refuses such a request before handling it, so repeating it is safe
	// for any method. A wait that would outlast the call's ctx is not
	// begun. The client's own resubscribes after a reconnect and its
	// unsubscribes wait and repeat for as long as it takes. Default 3;
	// negative: never.
	RateLimitRetries int
	// AuthRetries is how many reconnects in a row may have the token refused (the server's
	// -32001, or close 4001 before the auth result) before the client gives up: it then moves
	// to StateFailed and ends its calls and subscriptions with an error that matches both
	// ErrClosed and protocol.ErrUnauthenticated (Client.Err). A token source that keeps
	// returning a token the server refuses (a static token that expired, a revoked client)
	// is then told, rather than retried for ever. Default 3; negative: never give up.
	AuthRetries int
	// ReadLimit is the largest frame accepted from the server, in bytes.
	// Default 4 MiB.
	ReadLimit int64
	// OnStateChange is called on every state change, and on every failed
	// reconnect attempt (StateReconnecting again, with its error). err says
	// why a connection was lost or an attempt failed. Calls are serialized;
	// the callback must return quickly and must not call Close.
	OnStateChange func(state State, err error)
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.Codec == nil {
		r.Codec = codec.MsgPack
	}
	if r.HTTPClient == nil {
		r.HTTPClient = http.DefaultClient
	}
	if r.WebSocketRetry <= 0 {
		r.WebSocketRetry = 5 * time.Minute
	}
	if r.HeartbeatInterval < 0 {
		r.HeartbeatInterval = 0
	}
	switch {
	case r.RateLimitRetries == 0:
		r.RateLimitRetries = 3
	case r.RateLimitRetries < 0:
		r.RateLimitRetries = 0 // from here on, 0 means none
	}
	switch {
	case r.AuthRetries == 0:
		r.AuthRetries = 3
	case r.AuthRetries < 0:
		r.AuthRetries = 0 // from here on, 0 means never give up
	}
	if r.ConnectTimeout <= 0 {
		r.ConnectTimeout = 10 * time.Second
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 250 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 30 * time.Second
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = r.MinBackoff
	}
	if r.ReadLimit <= 0 {
		r.ReadLimit = 4 << 20
	}
	if r.OnStateChange == nil {
		r.OnStateChange = func(State, error) {}
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	return r
}

// State is the client's connection state.
type State int

const (
	// StateConnecting: the first connection is being made.
	StateConnecting State = iota
	// StateConnected: a connection is authenticated and in use.
	StateConnected
	// StateReconnecting: the connection was lost; the client is waiting
	// for or making the next attempt.
	StateReconnecting
	// StateClosed: Close was called.
	StateClosed
	// StateFailed: the server refused the token source's token on Options.AuthRetries
	// reconnects in a row; the client stopped reconnecting (Client.Err says why).
	StateFailed
)

func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateConnected:
		return "connected"
	case StateReconnecting:
		return "reconnecting"
	case StateClosed:
		return "closed"
	case StateFailed:
		return "failed"
	}
	return "unknown"
}
