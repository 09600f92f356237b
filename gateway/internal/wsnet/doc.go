// Package wsnet is the runtime machinery under the gateway's /rpc
// connections, there so that many idle connections cost little.
//
// Entry points: Timers runs every connection's heartbeat from one runtime
// timer (timers.go).
//
// Caveat: a build with -tags notimerheap gives each connection a timer of
// its own (timers_off.go), to measure what the heap saves
// (docs/benchmarks.md).
package wsnet
