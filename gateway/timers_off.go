//go:build notimerheap

package gateway

import "time"

// sessionTimers gives each session a runtime timer of its own, the simple
// way, in a build with -tags notimerheap; timers.go's one heap for all
// sessions is the default. Both methods are called under the session's mu.
type sessionTimers struct{}

// heartbeatTimer is a session's own timer, made by its first schedule.
type heartbeatTimer struct{ t *time.Timer }

// schedule sets s's heartbeat for due (Unix ns).
func (*sessionTimers) schedule(s *session, due int64) {
	d := max(time.Duration(due-time.Now().UnixNano()), 0)
	if s.hb.t == nil {
		s.hb.t = time.AfterFunc(d, s.heartbeat)
	} else {
		s.hb.t.Reset(d)
	}
}

// remove stops s's heartbeat.
func (*sessionTimers) remove(s *session) {
	if s.hb.t != nil {
		s.hb.t.Stop()
	}
}
