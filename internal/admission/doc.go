// Package admission holds what the gateway admits a client's work and connections by: token
// buckets whose level may fall into a debt (Bucket), a frame budget whose refusals have a budget
// of their own (Limiter: BALLET_REQUEST_RATE, BALLET_SUBJECT_REQUEST_RATE and the frame budget),
// a subject's replay budget (Replay: BALLET_REPLAY_RATE), the replica's count of connections
// (Conns: BALLET_MAX_CONNECTIONS), its registry of connections by subject with what they share
// (Subjects: BALLET_MAX_CONNECTIONS_PER_SUBJECT), and the shedder that closes the connections
// with the most queued past the replica's budget (Shedder: BALLET_REPLICA_QUEUE_BYTES).
//
// Entry points: Limiter.Take for each frame or request, Replay.Retry and Replay.Charge around a
// replay, each on a monotonic clock (Now), so that a wall clock set back does not stop the
// budgets refilling; Conns.Acquire and Subjects.Acquire as a connection opens and authenticates;
// Shedder.Over as the queued bytes pass the budget, and Shedder.Close at shutdown. The gateway's
// sessions call them, name the limits and answer the refusals; the per-address budgets of
// clients not authenticated are httpapi.SubjectRate's.
//
// Caveat: a budget's zero value is full: it starts at its burst on first use. Subjects and
// Shedder know nothing of sessions: they are generic over the connections they are given.
package admission
