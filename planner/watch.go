package planner

import "sync/atomic"

// watch is one registered fn. Outputs reach it through ch, which only deliver sends on and
// only dropLocked closes, both under Service.mu.
type watch struct {
	svc     *Service
	session string
	project string // the session's project
	subject string // who watches
	fn      func(Output) bool
	ch      chan Output
	stopped atomic.Bool // fn must not be called any more
	cut     atomic.Bool // the watcher lost access: outputs still queued are dropped
	lagging bool        // ended because output was lost; set before ch is closed
	reason  string      // ended by CloseWatches, for this reason; set before ch is closed
	dropped bool        // removed and ch closed; under Service.mu
}

// run calls fn with each output until the watch ends.
func (w *watch) run() {
	defer w.svc.watchWG.Done()
	for out := range w.ch {
		if w.stopped.Load() || w.cut.Load() {
			continue
		}
		if !w.fn(out) {
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

// stop ends the watch. A call of fn in progress (or starting) when stop is called may
// still happen; none follows it.
func (w *watch) stop() {
	w.stopped.Store(true)
	w.svc.mu.Lock()
	w.svc.dropLocked(w, false)
	w.svc.mu.Unlock()
}

// dropLocked unregisters w and closes its queue; lagging makes fn's last call OutputLagging.
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
	close(w.ch)
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
