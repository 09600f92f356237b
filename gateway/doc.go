// Package gateway is the realtime gateway's HTTP side: the /rpc WebSocket
// endpoint with its sessions, the REST and root handlers it mounts, health,
// readiness and metrics.
//
// Entry points: NewServer, then Server.Handler (client port) and
// Server.AdminHandler (admin port); Server.Shutdown drains. A connection is
// a session (session.go: auth timeout, heartbeats, close); its messages are
// routed by the method table (methods.go) to handlers in authn.go,
// subscribe.go, presence.go and planner.go. Limits are in limits.go, the socket-level
// speed work (parked readers, corked and direct writes) in park_*.go,
// lean*.go and transport.go.
//
// Caveat: on Linux, idle connections hold no goroutine; elsewhere each
// keeps a reader goroutine.
package gateway
