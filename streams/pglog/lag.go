package pglog

import (
	"context"
	"sync"
	"time"
)

// How far the standby is behind, measured once a second on the standby alone:
//
//   - 0 when it is not in recovery (promoted, or not a standby at all), or when its WAL
//     receiver runs and it has replayed all the WAL it received;
//   - when it has received WAL it has not replayed yet: the age of the last commit it
//     replayed (now − pg_last_xact_replay_timestamp(), both on the standby's clock; when it
//     has replayed none since it started, as below);
//   - when it does not answer, or no WAL receiver runs (it is not streaming, so it cannot tell
//     how much it is missing): the time since it was last known to be caught up. This grows
//     while the standby is down or cut off from the primary.
//
// A pooler in front of several standbys answers for whichever it picked; give it health checks
// of its own.
const lagQuery = `SELECT pg_is_in_recovery(),
	coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), false),
	EXISTS (SELECT 1 FROM pg_stat_wal_receiver),
	coalesce(greatest(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0), -1)::float8`

// TailStatus is the standby's state as last measured.
type TailStatus struct {
	// Lag is how far the standby is behind the primary (see above).
	Lag time.Duration
	// Err is why the last measurement failed, nil when it succeeded.
	Err error
	// Streaming is false when the standby answered but no WAL receiver ran.
	Streaming bool
}

type lagState struct {
	mu         sync.Mutex
	caughtUpAt time.Time // the last time the standby was known to have everything
	measured   time.Duration
	known      bool // the last probe measured the lag (streaming, or not in recovery)
	streaming  bool
	err        error
}

func (s *lagState) init(now time.Time) {
	s.mu.Lock()
	s.caughtUpAt = now
	s.mu.Unlock()
}

// status returns the lag at now: the measured one while the last probe could measure it, else
// the time since the standby was last known caught up.
func (s *lagState) status(now time.Time) TailStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := TailStatus{Err: s.err, Streaming: s.streaming}
	if s.known {
		st.Lag = s.measured
	} else {
		st.Lag = max(now.Sub(s.caughtUpAt), 0)
	}
	return st
}

// record notes a probe started at at: its result, or err.
func (s *lagState) record(at time.Time, inRecovery, replayedAll, streaming bool, age time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if err != nil {
		s.known = false
		return
	}
	s.streaming = streaming || !inRecovery
	switch {
	case !inRecovery || (streaming && replayedAll):
		s.known, s.measured, s.caughtUpAt = true, 0, at
	case streaming && age >= 0:
		s.known, s.measured = true, age
		if c := at.Add(-age); c.After(s.caughtUpAt) {
			s.caughtUpAt = c
		}
	default:
		s.known = false
	}
}

func (t *tail) probeLag(ctx context.Context) error {
	at := time.Now()
	ctx, cancel := context.WithTimeout(ctx, lagProbeTimeout)
	defer cancel()
	var inRecovery, replayedAll, streaming bool
	var age float64
	err := t.pool.QueryRow(ctx, lagQuery).Scan(&inRecovery, &replayedAll, &streaming, &age)
	d := time.Duration(age * float64(time.Second))
	if age < 0 {
		d = -1
	}
	t.lag.record(at, inRecovery, replayedAll, streaming, d, err)
	return err
}

func (t *tail) probeLoop(ctx context.Context) {
	defer close(t.done)
	tick := time.NewTicker(lagProbeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = t.probeLag(ctx)
		}
	}
}

// TailStatus returns the standby's lag as last measured (once a second); a log that reads the
// primary has no lag.
func (l *Log) TailStatus() TailStatus {
	if l.tail == nil {
		return TailStatus{Streaming: true}
	}
	return l.tail.lag.status(time.Now())
}

// Tailing reports whether the log reads a standby (streams.Follower).
func (l *Log) Tailing() bool { return l.tail != nil }
