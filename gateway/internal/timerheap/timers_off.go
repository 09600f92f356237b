//go:build notimerheap

package timerheap

import "time"

// Timers gives each value a runtime timer of its own, the simple way, in a
// build with -tags notimerheap; timers.go's one heap for all is the
// default. Schedule and Remove of one value are called one at a time (its
// owner's lock).
type Timers[B Beater] struct{}

// Beater is what Timers schedules: see timers.go.
type Beater interface {
	HeartbeatTimer() *Timer
	Heartbeat()
}

// Timer is a value's own timer, made by its first Schedule.
type Timer struct{ t *time.Timer }

// Schedule sets b's heartbeat for due (Unix ns).
func (*Timers[B]) Schedule(b B, due int64) {
	d := max(time.Duration(due-time.Now().UnixNano()), 0)
	if t := b.HeartbeatTimer(); t.t == nil {
		t.t = time.AfterFunc(d, b.Heartbeat)
	} else {
		t.t.Reset(d)
	}
}

// Remove stops b's heartbeat.
func (*Timers[B]) Remove(b B) {
	if t := b.HeartbeatTimer(); t.t != nil {
		t.t.Stop()
	}
}
