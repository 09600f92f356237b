// Command ballet-bench is a load generator for a ballet-gateway deployment:
// subscribers over either codec, a Postgres writer at a given rate and
// batch size, and the checks that the gateway promises (no gaps, no
// duplicates, commit order).
//
// Modes (--mode): live (N subscribers, writer at --rate: latency
// percentiles, deliveries/s, gaps and duplicates), saturate (writer as fast
// as it can: deliveries/s), idle (N subscribed connections: server RSS per
// connection), replay (one client replays --replay-events events --repeat
// times), replay-storm (N clients reconnect at once with from_seq and catch
// up), writer (batched writers only: events/s and commit order), planner (the
// tool serves the model's stream for many planner turns at once and follows
// every delta to each watcher: latency from the model's write, gaps,
// duplicates, turns without done).
//
// Subscribers speak WebSocket (GET /rpc) or, with --transport http in the
// live, saturate and idle modes, hold one POST /rpc each whose
// stream.subscribe streams NDJSON (JSON only); a response that ends or
// breaks is a lost connection, as a WebSocket's close is.
//
// Latency is receive time minus the time the writer's COMMIT returned,
// both read from this process' monotonic clock. The benchmark creates
// nothing on the server but the planner mode's sessions: the project and the subject's grant must exist
// (ballet-gateway admin project-create BENCH Bench; admin grant BENCH
// SUBJECT viewer). Writing needs the gateway's database (--db), so the
// writing modes run against `serve`, not `dev`.
//
// Exit status: 0 when every check passed, 1 when one failed or the run
// could not be carried out, 2 for usage errors.
package main
