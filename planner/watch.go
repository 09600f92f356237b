package planner

import "sync/atomic"

// watch is one registered fn. Outputs reach it through ch, which only deliver sends on and
// only dropLocked closes, both under Service.mu.
type watch struct {
	svc     *Service
	session string
	fn      func(Output) bool
	ch      chan Output
	stopped atomic.Bool // fn must not be called any more
	lagging bool        // ended because output was lost; set before ch is closed
	dropped bool        // removed and ch closed; under Service.mu
}

// run calls fn with each output until the watch ends.
func (w *watch) run() {
	defer w.svc.watchWG.Done()
	for out := range w.ch {
		if w.stopped.Load() {
			continue
		}
		if !w.fn(out) {
			w.stop()
		}
	}
	if w.lagging && !w.stopped.Load() {
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
