package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/ballet/gateway/planner"
)

// turnLog is a turn's stored outputs, by offset, and its cut.
type turnLog struct {
	outs   map[int64]planner.Output
	cut    int64     // the cut's offset; 0 when none
	last   time.Time // of the latest output or the cut
	doneAt time.Time // when done was stored; zero before
}

type sendKey struct{ subject, key string }

type sent struct {
	seq int64
	at  time.Time
}

func (s *Store) AppendOutput(ctx context.Context, o planner.Output) error {
	return s.AppendOutputs(ctx, planner.OutputBatch{Outputs: []planner.Output{o}})
}

func (s *Store) CutOutputs(ctx context.Context, session, turn string, offset int64) error {
	return s.AppendOutputs(ctx, planner.OutputBatch{Cuts: []planner.Output{{Session: session, Turn: turn, Offset: offset}}})
}

// AppendOutputs applies the batch under one lock, as Postgres applies it in one statement.
func (s *Store) AppendOutputs(ctx context.Context, b planner.OutputBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := time.Now()
	for _, o := range b.Outputs {
		sess := s.sessions[o.Session]
		if sess == nil {
			continue // deleted meanwhile, as in Postgres
		}
		tl := sess.turnLog(o.Turn)
		if _, dup := tl.outs[o.Offset]; dup || o.Offset == tl.cut {
			continue
		}
		tl.outs[o.Offset] = o
		tl.last = t
		if o.Type == planner.OutputDone {
			tl.doneAt = t
		}
	}
	for _, c := range b.Cuts {
		sess := s.sessions[c.Session]
		if sess == nil {
			continue
		}
		tl := sess.turnLog(c.Turn)
		if _, dup := tl.outs[c.Offset]; dup || tl.cut != 0 {
			continue
		}
		tl.cut, tl.last = c.Offset, t
	}
	for _, g := range b.Given {
		if l, held := s.leases[g.Session]; held && l.Owner == g.Owner && g.Given > l.Given {
			l.Given = g.Given
			s.leases[g.Session] = l
		}
	}
	return nil
}

// turnLog returns the session's record of turn, made when it has none.
func (sess *session) turnLog(turn string) *turnLog {
	if sess.turns == nil {
		sess.turns = map[string]*turnLog{}
	}
	tl := sess.turns[turn]
	if tl == nil {
		tl = &turnLog{outs: map[int64]planner.Output{}}
		sess.turns[turn] = tl
	}
	return tl
}

func (s *Store) TurnOutputs(ctx context.Context, session, turn string, after int64, window time.Duration) (planner.KeptOutputs, bool, error) {
	if err := ctx.Err(); err != nil {
		return planner.KeptOutputs{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[session]
	if sess == nil || sess.turns[turn] == nil {
		return planner.KeptOutputs{}, false, nil
	}
	tl := sess.turns[turn]
	if !tl.doneAt.IsZero() && time.Since(tl.doneAt) > window {
		return planner.KeptOutputs{}, false, nil
	}
	offs := make([]int64, 0, len(tl.outs))
	for off := range tl.outs {
		if off > after {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	kept := planner.KeptOutputs{Outputs: make([]planner.Output, len(offs)), Cut: tl.cut, Ended: !tl.doneAt.IsZero()}
	for i, off := range offs {
		kept.Outputs[i] = tl.outs[off]
	}
	return kept, true, nil
}

func (s *Store) LastOffset(ctx context.Context, session, turn string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[session]
	if sess == nil || sess.turns[turn] == nil {
		return 0, nil
	}
	tl := sess.turns[turn]
	last := tl.cut
	for off := range tl.outs {
		last = max(last, off)
	}
	return last, nil
}

func (s *Store) ExpireOutputs(ctx context.Context, window, abandoned time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		for turn, tl := range sess.turns {
			if (!tl.doneAt.IsZero() && time.Since(tl.doneAt) > window) || time.Since(tl.last) > abandoned {
				delete(sess.turns, turn)
			}
		}
	}
	return nil
}

func (s *Store) SentWithKey(ctx context.Context, session, subject, key string, within time.Duration) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[session]
	if sess == nil {
		return 0, false, nil
	}
	v, ok := sess.sends[sendKey{subject, key}]
	if !ok || time.Since(v.at) > within {
		return 0, false, nil
	}
	return v.seq, true, nil
}

func (s *Store) ExpireSends(ctx context.Context, within time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		for k, v := range sess.sends {
			if time.Since(v.at) > within {
				delete(sess.sends, k)
			}
		}
	}
	return nil
}
