package planner

import (
	"context"
	"time"
)

// Store keeps sessions, transcripts, summaries and turn leases. Every appended message
// appends its planner.message event (MessageEvent) to the event log in the same transaction.
// It does not check permissions: Service does. Errors match the package sentinels (an
// unknown or malformed session id is ErrNotFound).
type Store interface {
	// CreateSession stores a new session; ID, Project, Title, CreatedBy and CreatedAt are
	// set. ErrNotFound when the project does not exist.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns one session, Running set from its lease.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions returns one page of a project's sessions, newest first (SessionKey), Running
	// set. The page's limit is set (SessionPage.Check).
	Sessions(ctx context.Context, project string, page SessionPage) (SessionList, error)
	// Messages returns the session's messages with seq > after, by seq.
	Messages(ctx context.Context, session string, after int64) ([]Message, error)
	// AppendMessage stores m as the session's next message and appends its planner.message
	// event, all or nothing.
	AppendMessage(ctx context.Context, session string, m NewMessage) (*Message, error)
	// Summary returns the session's summary with the highest UpTo, nil when it has none.
	Summary(ctx context.Context, session string) (*Summary, error)
	// SaveSummary stores a summary (replacing one with the same UpTo).
	SaveSummary(ctx context.Context, s *Summary) error

	Leases
	Outputs
	Sends
}

// Outputs keeps the outputs of turns, where every replica reads them, so that a watcher that
// reconnects resumes a turn where it was.
type Outputs interface {
	// AppendOutput stores o, whose Session, Turn and Offset are set. An offset already stored
	// (an output or the cut) keeps what it holds.
	AppendOutput(ctx context.Context, o Output) error
	// CutOutputs records that the turn's outputs from offset on are not stored, but for its
	// error and done: the turn passed its bounds. The cut takes offset's place; a turn keeps
	// its first cut.
	CutOutputs(ctx context.Context, session, turn string, offset int64) error
	// AppendOutputs stores a batch in one write: its outputs as AppendOutput would, its cuts
	// as CutOutputs would, and raises the Given of the leases it names (those their owner
	// no longer holds are left). A session deleted meanwhile is skipped, as in AppendOutput.
	AppendOutputs(ctx context.Context, b OutputBatch) error
	// TurnOutputs returns what is stored of the session's turn after offset after. found is
	// false when nothing of the turn is stored (not even its cut), or its done was stored
	// more than window ago.
	TurnOutputs(ctx context.Context, session, turn string, after int64, window time.Duration) (kept KeptOutputs, found bool, err error)
	// LastOffset returns the highest offset stored for the turn, its cut's included (what is
	// numbered after it never falls on the cut), 0 when none.
	LastOffset(ctx context.Context, session, turn string) (int64, error)
	// ExpireOutputs removes the outputs (and cut) of turns whose done was stored more than
	// window ago, and of turns that stored nothing for abandoned.
	ExpireOutputs(ctx context.Context, window, abandoned time.Duration) error
}

// OutputBatch is what one replica stores of its turns' outputs at once (Outputs.AppendOutputs).
type OutputBatch struct {
	// Outputs are kept for resuming; Session, Turn and Offset are set.
	Outputs []Output
	// Cuts are the turns' cuts: Session, Turn and Offset set, nothing else.
	Cuts []Output
	// Given are the highest offsets the batch gives out, one per turn: Session, Owner (the
	// turn's lease owner) and Given set.
	Given []Lease
}

// KeptOutputs is what a store holds of a turn's output, for a watcher resuming it after
// some offset.
type KeptOutputs struct {
	// Outputs are the stored outputs with a greater offset, by offset; never the cut.
	Outputs []Output
	// Cut is the offset of the turn's first output not stored (CutOutputs), 0 when none.
	Cut int64
	// Ended is set when the turn's done is stored.
	Ended bool
}

// Sends remembers the idempotency keys of human messages (NewMessage.IdempotencyKey).
type Sends interface {
	// SentWithKey returns the seq of the message subject sent to the session with key less
	// than within ago; found is false when there is none.
	SentWithKey(ctx context.Context, session, subject, key string, within time.Duration) (seq int64, found bool, err error)
	// ExpireSends forgets keys older than within.
	ExpireSends(ctx context.Context, within time.Duration) error
}

// Lease is a session's turn lease: while it has not expired, Owner runs the session's turn.
type Lease struct {
	Session   string
	Owner     string
	ExpiresAt time.Time
	// Given is the highest offset of output the turn gave out, as its batches recorded it
	// (OutputBatch.Given): its error and done come after it. 0 until the first batch.
	Given int64
	Trace TraceContext // of the send that started the turn
}

// TraceContext is a W3C trace context as its headers spell it: traceparent and tracestate,
// "" when there is none.
type TraceContext struct {
	Parent string
	State  string
}

// Leases is the one-turn-per-session rule, kept where every replica sees it. Expiry is judged
// by the store's clock (the database's in Postgres), so replicas' clocks need not agree.
type Leases interface {
	// Acquire takes the session's lease for owner, running a turn of subject's, until ttl from
	// now, when it is free or expired; taken is false when an unexpired lease holds it. stale
	// reports that an expired lease was replaced (its turn died without ending). When subject
	// holds perSubject unexpired leases of other sessions already (perSubject > 0), it takes
	// nothing and err is LimitReached(LimitTurns, perSubject, 0): counted and taken atomically, so that
	// of concurrent callers on all replicas at most perSubject hold leases. tc is kept with the
	// lease, for Expired.
	Acquire(ctx context.Context, session, owner, subject string, perSubject int, ttl time.Duration, tc TraceContext) (taken, stale bool, err error)
	// Renew extends the leases (Session and Owner set: one replica's turns) to ttl from now,
	// all in one write, and returns what it found of each, in the leases' order.
	Renew(ctx context.Context, leases []Lease, ttl time.Duration) ([]Renewal, error)
	// RequestCancel marks the session's lease, if any, as asked to stop.
	RequestCancel(ctx context.Context, session string) error
	// Release removes owner's lease, if it still holds it.
	Release(ctx context.Context, session, owner string) error
	// Expired returns the expired leases among the sessions', with Given and their trace contexts.
	Expired(ctx context.Context, sessions []string) ([]Lease, error)
	// ReleaseExpired removes, in one write, each of leases (as Expired returned them) that is
	// still exactly that expired lease (same owner, same expiry), and returns those it removed;
	// of several callers for the same lease, exactly one gets it.
	ReleaseExpired(ctx context.Context, leases []Lease) ([]Lease, error)
}

// Renewal is what Leases.Renew found of one lease.
type Renewal struct {
	Held   bool // its owner holds it still, now until ttl from now
	Cancel bool // held, and RequestCancel was called for the session since it was taken
}
