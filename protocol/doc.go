// Package protocol is the realtime API's table of names: every method the gateway serves,
// every notification it sends, the API's own error codes with their names and its own close
// codes, and the auth result's Limits. The gateway routes and labels its metrics by it, the Go
// client calls and dispatches by it, and the documents' tests hold it against protocol.md and
// asyncapi.yaml.
//
// Entry points: the method constants (Auth … PlannerOutput); Lookup and Names read the
// table, whose Method entries say which side sends each (Served, Sent). Code is an error
// code (ErrUnauthenticated … ErrLimitExceeded) that is itself an error; Codes lists them.
// CloseCodes lists the close codes beyond RFC 6455's (CloseHeartbeatTimeout …).
//
// Caveat: JSON-RPC's own codes (-32700, -326xx) are package rpc's; this package imports none.
package protocol
