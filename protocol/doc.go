// Package protocol is the realtime API's one description in Go: every method the gateway
// serves and every notification it sends, with the Go types of their params and results, the
// API's own error codes with their names, and its own close codes. The gateway routes, decodes,
// answers and labels its metrics by it; the Go client calls, reads and dispatches by it; the
// browser client's wire types are generated from it (internal/wirejs); and the documents' tests
// hold protocol.md and asyncapi.yaml against it, key for key.
//
// Entry points: the method constants (Auth … PlannerOutput); Lookup and Names read the
// table, whose Method entries say which side sends each (Served, Sent) and give the types
// (SubscribeParams, SubscribeResult, …); Fields lists a type's keys as they go on the wire.
// Code is an error code (ErrUnauthenticated … ErrLimitExceeded) that is itself an error; Codes
// lists them. CloseCodes lists the close codes beyond RFC 6455's (CloseHeartbeatTimeout …).
//
// Caveat: JSON-RPC's own codes (-32700, -326xx) are package rpc's; this package imports only
// codec (for RawJSON, a payload that is JSON text in Go and a map in MessagePack).
package protocol
