// Package web is the browser side of the gateway: a JavaScript client of the
// realtime API (web/src/client: MessagePack or JSON over WebSocket, auth
// refresh, heartbeats, reconnects with gap-free resubscription) and the demo
// project board that `ballet-gateway dev` serves at "/" (web/src/board: live
// columns, REST writes with If-Match, the planner chat).
//
// Entry point: Handler serves the built assets embedded from web/dist. They
// are built with `make web` (esbuild, from npm) and committed, so building
// the gateway needs nothing but Go; a test fails with "run make web" when
// dist no longer matches the sources. The client's wire types (src/client/wire.js) are
// generated from package protocol's Go types (internal/apigen, run by `make generate`).
//
// Caveat: the board signs in through the development issuer (/dev/token), so
// it works against `ballet-gateway dev` only.
package web
