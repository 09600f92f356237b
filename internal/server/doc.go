// Package server is the composition root of a replica: it builds the whole object graph of the
// gateway from one Options (the event log and project store, in memory or on Postgres; the
// fan-out hub and the tailer that feeds it; the token verifier and the operators' sign-outs
// and blocks; presence; the tracker, the planner and their REST surfaces; the operators'
// listings of connections; the gateway's server and its metrics), registers every metric, and
// owns the callbacks between the parts. The commands serve and dev, and the tests' harness
// (gateway/gatewaytest), all build their replica here, so the wiring cannot drift apart.
//
// Entry points: New builds the graph and starts nothing that delivers events; Start starts the
// tailer and loads the sign-outs and blocks (before the first connection); Run does Start,
// listens on both ports, serves until its context ends and drains; Close closes the parts in
// the order a shutdown needs. A library package never imports it: it only wires them.
package server
