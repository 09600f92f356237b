package planner

import (
	"context"
	"sync/atomic"
)

// watch is one registered fn. Outputs reach it through queue, which only deliver puts to
// and only dropLocked closes, both under Service.mu.
type watch struct {
	svc     *Service
	session string
	project string // the session's project
	subject string // who watches
	fn      func(Output) bool
	queue   outputQueue
	stopped atomic.Bool // fn must not be called any more
	cut     atomic.Bool // the watcher lost access: outputs still queued are dropped
	lagging bool        // ended because output was lost; set before queue is closed
	reason  string      // ended by CloseWatches, for this reason; set before queue is closed
	dropped bool        // removed and queue closed; under Service.mu

	// The run goroutine's: stored outputs to deliver first (a resumed turn), and the turn
	// and offset of the last output delivered, to drop what the replay already gave and to
	// notice an output that never came.
	replay []Output
	turn   string
	offset int64
}

// Watch registers fn for the session's live output, then reports whether a turn runs now
// (no output between the two is lost). It needs tracker.read on the session's project.
// fn is called in order, from one goroutine per watch, and must not block; when it returns
// false the watch ends. stop ends the watch (idempotent). ctx bounds this call only. If
// output is lost (see OutputLagging), or the watcher loses access (see CloseWatches), fn's
// last call says so.
func (s *Service) Watch(ctx context.Context, c Caller, session string, fn func(Output) bool) (running bool, stop func(), err error) {
	res, stop, err := s.WatchFrom(ctx, c, session, WatchOptions{}, fn)
	return res.Running, stop, err
}

// WatchOptions ask a watch to resume a turn's output (planner.watch's turn and after).
type WatchOptions struct {
	// Turn is the turn to resume; "" means the turn running now, if any.
	Turn string
	// After, when set, asks for the turn's outputs with offset > *After first (0: from its
	// start), then live output; without it, only live output follows.
	After *int64
}

// WatchResult is what planner.watch answers.
type WatchResult struct {
	Running bool
	// Turn is the turn resumed, or else the turn running now ("" when none).
	Turn string
	// Resumed is set when resuming was asked for: false when the turn is unknown, expired,
	// or some of its output after After was not kept (the client reloads the transcript).
	// A turn past its bounds (Options.TurnOutputs) is not resumed while it runs.
	Resumed *bool
}

// WatchFrom is Watch that can resume a turn: the turn's stored outputs after opts.After
// come first, then live output, without a gap or a duplicate between the two. A turn
// that ended less than the resume window ago is resumed up to its done.
func (s *Service) WatchFrom(ctx context.Context, c Caller, session string, opts WatchOptions, fn func(Output) bool) (res WatchResult, stop func(), err error) {
	sess, err := s.lookup(ctx, session)
	if err != nil {
		return res, nil, err
	}
	w := &watch{svc: s, session: session, project: sess.Project, subject: c.Subject, fn: fn}
	w.queue.cond.L = &w.queue.mu
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return res, nil, ErrClosed
	}
	set := s.watches[session]
	if set == nil {
		set = map[*watch]struct{}{}
		s.watches[session] = set
	}
	set[w] = struct{}{}
	s.watchWG.Add(1)
	s.mu.Unlock()
	// Access is checked once w is registered, and fn sees nothing before: a revocation
	// that CloseWatches handled before w was there was committed before this check, which
	// sees it; a later one ends w. Outputs wait in w's queue meanwhile.
	err = s.readable(ctx, c, sess)
	if err == nil {
		sess, err = s.store.Session(ctx, session)
	}
	if err == nil && opts.After != nil {
		res.Resumed = new(bool)
		*res.Resumed, err = s.resume(ctx, w, sess, opts)
	}
	if err != nil {
		w.stop()
		s.watchWG.Done() // for the run that never starts
		return res, nil, err
	}
	res.Running, res.Turn = sess.Running, sess.Turn
	if res.Resumed != nil && *res.Resumed {
		res.Turn = w.turn
	}
	go w.run()
	return res, w.stop, nil
}

// resume loads what w replays: the stored outputs of the turn after opts.After, when they
// are all there. The watch is registered already, so an output published meanwhile is
// either stored (and replayed) or queued (and, when replayed too, dropped by offset); the
// same holds for the turn's cut, stored before the first output not kept is sent.
func (s *Service) resume(ctx context.Context, w *watch, sess *Session, opts WatchOptions) (bool, error) {
	turn, after := opts.Turn, *opts.After
	if turn == "" {
		turn = sess.Turn
	}
	if turn == "" || after < 0 {
		return false, nil
	}
	kept, found, err := s.store.TurnOutputs(ctx, sess.ID, turn, after, s.window)
	if err != nil {
		return false, err
	}
	if !found || !complete(kept, after) {
		return false, nil // the client reloads the transcript
	}
	w.replay, w.turn, w.offset = kept.Outputs, turn, after
	return true, nil
}

// complete reports whether kept holds every output of its turn after offset after. The
// outputs from a cut on went out live only: while the turn runs, no store knows how many;
// once it has ended, its error and done, stored at the offsets that follow them, show the
// hole to a watcher resuming from before them.
func complete(kept KeptOutputs, after int64) bool {
	if kept.Cut > 0 && !kept.Ended {
		return false
	}
	for i, o := range kept.Outputs {
		if o.Offset != after+int64(i)+1 {
			return false // not kept past a bound, or lost
		}
	}
	return true
}

// run calls fn with the replayed outputs, then with each live output, until the watch ends.
func (w *watch) run() {
	defer w.svc.watchWG.Done()
	for _, out := range w.replay {
		if !w.offer(out) {
			w.stop()
			break
		}
	}
	w.replay = nil
	for w.queue.wait() {
		if out, ok := w.queue.take(); ok && !w.offer(out) {
			w.stop()
		}
	}
	if w.stopped.Load() {
		return
	}
	switch {
	case w.reason != "":
		w.stopped.Store(true)
		w.fn(Output{Session: w.session, Type: OutputClosed, Text: w.reason})
	case w.lagging:
		w.stopped.Store(true)
		w.fn(Output{Session: w.session, Type: OutputLagging})
	}
}

// offer gives out to fn unless the watch saw it already; an output after a hole in a turn
// (one that was lost) ends the watch as lagging, with nothing after it delivered. It
// reports false when fn wants no more.
func (w *watch) offer(out Output) bool {
	if w.stopped.Load() || w.cut.Load() {
		return true
	}
	if out.Turn != "" && out.Turn == w.turn {
		switch {
		case out.Offset <= w.offset:
			return true // replayed already
		case out.Offset > w.offset+1:
			w.cut.Store(true)
			w.svc.mu.Lock()
			w.svc.dropLocked(w, true)
			w.svc.mu.Unlock()
			return true
		}
	}
	if out.Turn != "" {
		w.turn, w.offset = out.Turn, out.Offset
	}
	return w.fn(out)
}

// stop ends the watch. A call of fn in progress (or starting) when stop is called may
// still happen; none follows it.
func (w *watch) stop() {
	w.stopped.Store(true)
	w.svc.mu.Lock()
	w.svc.dropLocked(w, false)
	w.svc.mu.Unlock()
}

// dropLocked unregisters w and closes its queue; lagging makes fn's last call OutputLagging.
// What is queued still is delivered first, unless w was cut or stopped: then it is dropped
// at once.
func (s *Service) dropLocked(w *watch, lagging bool) {
	if w.dropped {
		return
	}
	w.dropped = true
	w.lagging = lagging
	if set := s.watches[w.session]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(s.watches, w.session)
		}
	}
	w.queue.close(w.cut.Load() || w.stopped.Load())
}

// CloseWatches ends the watches of project's sessions held by subject, or by anyone when
// subject is empty: the watcher lost tracker.read there (the gateway wires it to
// streams.HubOptions.OnAccessLost, so every replica does this when it reads member.revoked
// or project.deleted in the log). Outputs such a watch still queues are dropped, and fn's
// last call is Output{Type: OutputClosed, Text: reason} (reason must not be empty); a call of fn in progress may
// complete first, no other output follows. It never blocks.
//
// A Watch that runs concurrently either sees the loss of access (it fails) or is ended
// here, provided the change that takes access is committed before CloseWatches is called
// for it, as it is when CloseWatches follows the event in the log: Watch checks access
// after registering the watch.
func (s *Service) CloseWatches(project, subject, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.watches {
		for w := range set {
			if w.project == project && (subject == "" || w.subject == subject) {
				w.cut.Store(true)
				w.reason = reason
				s.dropLocked(w, false)
			}
		}
	}
}
