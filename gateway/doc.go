// Package gateway is the realtime gateway: the /rpc WebSocket endpoint with its sessions and
// the method table, and the client and admin ports' handlers it mounts (the REST API, the root,
// health, readiness and metrics).
//
// Entry points: NewServer, Server.SetAPI for the REST surfaces built after it, then
// Server.Handler (client port) and Server.AdminHandler (admin port); Server.Shutdown drains.
// The binary and the tests' harness build it, and what it needs, in internal/server. A
// connection is a session (session.go: auth timeout, heartbeats, close; its lifecycle in
// lifecycle.go); its messages are routed by the method table (methods.go), which says what
// each method needs (a person, the planner, a permission, a subscription place) and holds its
// handler to it, to handlers in authn.go, subscribe.go, presence.go and planner.go; their
// params and results are package protocol's types. Limits are answered in limits.go, the
// budgets spent in budgets.go and the replica's most behind closed in shed.go; what counts and
// decides (the connections' count, the subjects' registry, the token buckets, the shedder) is
// internal/admission's. The client port's sockets are counted, the admin port served and REST
// requests logged by gateway/edge; the sessions' WebSockets are served by gateway/internal/wsnet
// (parked readers, corked and direct writes), their heartbeats by gateway/internal/timerheap. An
// operator's sign-out or block closes a subject's connections through Server.CloseSubject
// (operator.ApplySubjectEvent). With Options.TracerProvider, spans.go records a span for each
// REST request, upgrade and JSON-RPC request, parented on the caller's trace context.
//
// Caveat: on Linux, idle connections hold no goroutine; elsewhere each
// keeps a reader goroutine.
package gateway
