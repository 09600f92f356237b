package planner

import (
	"sync"
	"time"
)

// windowLimit admits at most max events of one subject in any window: it keeps the times of
// each subject's events within the last window, and forgets subjects without any.
type windowLimit struct {
	max    int
	window time.Duration

	mu    sync.Mutex
	times map[string][]time.Time // by subject: within the window, oldest first
	swept time.Time              // when subjects without recent events were last forgotten
}

func newWindowLimit(max int, window time.Duration) *windowLimit {
	return &windowLimit{max: max, window: window, times: map[string][]time.Time{}}
}

// take admits an event of subject at now; when it does not, retry is how long until it would.
func (l *windowLimit) take(subject string, now time.Time) (retry time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	since := now.Add(-l.window)
	if now.Sub(l.swept) >= l.window {
		for k, ts := range l.times {
			if !ts[len(ts)-1].After(since) {
				delete(l.times, k)
			}
		}
		l.swept = now
	}
	ts := l.times[subject]
	i := 0
	for i < len(ts) && !ts[i].After(since) {
		i++
	}
	ts = ts[i:]
	if len(ts) >= l.max {
		l.times[subject] = ts
		return ts[len(ts)-l.max].Sub(since), false
	}
	l.times[subject] = append(ts, now)
	return 0, true
}
