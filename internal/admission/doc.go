// Package admission holds what the gateway admits a client's work by: token buckets whose level
// may fall into a debt (Bucket), a frame budget whose refusals have a budget of their own
// (Limiter: BALLET_REQUEST_RATE, BALLET_SUBJECT_REQUEST_RATE and the frame budget), a subject's
// replay budget (Replay: BALLET_REPLAY_RATE), and the shedder that closes the connections with
// the most queued past the replica's budget (Shedder: BALLET_REPLICA_QUEUE_BYTES).
//
// Entry points: Limiter.Take for each frame or request, Replay.Retry and Replay.Charge around a
// replay, each on a monotonic clock (Now), so that a wall clock set back does not stop the
// budgets refilling; Shedder.Over as the queued bytes pass the budget, and Shedder.Close at
// shutdown. The gateway's sessions call them and name the limits; the per-address budgets of
// clients not authenticated are httpapi.SubjectRate's.
//
// Caveat: a budget's zero value is full: it starts at its burst on first use. The Shedder knows
// nothing of sessions: it is generic over the connections it is given.
package admission
