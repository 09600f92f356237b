// Package client is the Go client of the realtime API: JSON-RPC 2.0 over
// WebSocket (MessagePack by default, or JSON), built on package rpc.
//
// Dial connects and sends auth first; the client then refreshes the token
// with auth.refresh at 80 % of its lifetime, sends $/heartbeat every interval
// and treats three silent intervals as a dead connection. A lost connection
// is redialled with exponential backoff and full jitter, re-authenticated,
// and every subscription resumes from the last seq it delivered, so the
// application sees each event exactly once and in order. When the server can
// no longer replay (-32010), the subscription's OnResync hook runs (reload
// the snapshot) instead of events being lost silently.
//
// Transports: a connection goes over a WebSocket (GET /rpc) or over
// streaming HTTP (POST /rpc: one POST per request, JSON whatever the codec,
// each subscription's and planner watch's response kept open), for networks
// whose proxies refuse WebSocket upgrades (Options.Transport). By default
// (TransportAuto) the client dials a WebSocket, and tries HTTP when it does
// not open: the upgrade answered with an HTTP status that is not a WebSocket
// one (a 400, 403, 404, 405, 426 or 502 from a proxy, say), the connection
// reset or closed without an answer, or no answer within
// Options.ConnectTimeout (the attempt over HTTP then has a ConnectTimeout of
// its own). The gateway's own refusals for load (503 and 429) are waited out
// as always, and an address where nothing listens, or a WebSocket that opens
// without the codec's subprotocol (ErrSubprotocol), is not tried over HTTP.
// When the connection over HTTP is made, the client keeps to HTTP for
// Options.WebSocketRetry (5 minutes): the first reconnect after that tries a
// WebSocket again (a working connection is not ended to try); when it fails
// too, the attempt fails with both errors. Client.Transport says which one the
// connection uses; the log says so once at each switch (Info). Over HTTP the
// rest is the same: auth and auth.refresh are answered by the client (a
// system.ping checks the token; each POST carries it), no limits are
// advertised, the client sends no heartbeats, and a response kept open that
// is silent for three heartbeat intervals (the longer of
// Options.HeartbeatInterval and the server's, which each response gives in
// its Ballet-Heartbeat-Ms header), cut short, or ended by the server
// with a close code ends the connection as a WebSocket's end would:
// reconnect and resume. Each open response lives at most as long as the
// token it was sent with (the server ends it with close 4001 at the token's
// expiry, and the client resumes on a new connection).
//
// Planner watches resume the same way, from the turn and offset of the last
// output delivered (planner.watch's turn and after): the consumer sees each
// output once, in order, across reconnects, lagging closes and outputs lost
// on the way; WatchOptions.FromTurnStart joins a running turn from its
// start. When the server cannot replay (resumed: false), OnResume runs:
// reload the transcript. PlannerSend gives every message an idempotency key
// and sends it again with the same key when the connection ends before the
// answer, so the message counts once.
//
// The client keeps within the limits the auth result advertises
// (Client.Limits): its heartbeat interval is the server's unless
// Options.HeartbeatInterval is set; a subscription or planner watch beyond
// the subscription limit fails at once with a *LimitError, as the server's
// -32029 does; a PlannerSend text of more bytes than planner_message_bytes
// fails at once with a *LimitError that matches the server's -32602; a
// request refused for a rate (the connection's requests, the subject's
// requests, the subject's replays) is sent again after the server's
// retry_after_ms (Options.RateLimitRetries), and resubscribes after a
// reconnect always wait their turn. A subject with too many connections
// (close 4029) and a full replica (HTTP 503, a *HandshakeError) are retried
// with a longer backoff. The others are reported, not enforced: a send
// beyond planner_turns is the server's *LimitError (LimitPlannerTurns; send
// again once a turn is done), and a connection closed for queued_bytes
// (1013: it fell too far behind) reconnects and resumes like any other. Servers that advertise no limits get the spec's defaults.
//
// Extensions: SubscribeOptions.Types asks for only some event types, and
// SubscribeOptions.Presence makes the caller present on the stream and
// follows who else is (Subscription.Present, PresenceChanged; a fresh
// snapshot after each reconnect); SubscribeOptions.ItemPresence, on a
// project, follows who has each of its items open (Subscription.ItemsPresent);
// Client.PresenceGet and PresenceGetItems ask the server.
//
// Traces: every request carries the caller's trace context in params._meta
// ("traceparent", "tracestate", "baggage"), and the WebSocket upgrade in its
// headers, as written by the host program's OpenTelemetry propagator
// (otel.GetTextMapPropagator): the server's spans of the request join the
// caller's trace. Only the OpenTelemetry API is used; until the program
// installs a propagator (otel.SetTextMapPropagator with
// propagation.TraceContext, say) nothing is written, and a context without a
// span or baggage writes nothing either. Requests the client makes on its
// own (resubscribes, token refreshes) carry no trace context.
//
// Entry points: Dial, Client.Subscribe (events on a bounded channel),
// Client.PlannerWatch, Client.PlannerSend, Client.PlannerCancel, Client.Ping,
// Client.Call for any method (package protocol names them and gives their params and results as
// Go types), Client.Close.
// Errors from the server are *rpc.Error values that match, with errors.Is,
// JSON-RPC's codes (rpc.ErrXxx) and the API's (protocol.ErrXxx).
//
// Caveat: an application that does not read a subscription's channel loses
// that subscription (it ends with ErrSlowConsumer) rather than stalling the
// connection; size SubscribeOptions.Buffer for its bursts.
package client
