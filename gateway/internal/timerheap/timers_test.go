package timerheap

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// beat records its heartbeats; again, when positive, is how many times a
// heartbeat schedules the next one, 10 ms on, as a session does.
type beat struct {
	timers *Timers[*beat]
	mu     sync.Mutex // the owner's lock: Schedule and Remove of one value under it
	tm     Timer
	again  int
	fired  chan int64 // Unix ns of each heartbeat
}

func (b *beat) HeartbeatTimer() *Timer { return &b.tm }

func (b *beat) Heartbeat() {
	now := time.Now().UnixNano()
	b.mu.Lock()
	if b.again > 0 {
		b.again--
		b.timers.Schedule(b, now+int64(10*time.Millisecond))
	}
	b.mu.Unlock()
	b.fired <- now
}

func (b *beat) schedule(due time.Time) {
	b.mu.Lock()
	b.timers.Schedule(b, due.UnixNano())
	b.mu.Unlock()
}

// Every value's heartbeat runs once, not before it is due, whatever the
// order they were scheduled in; a moved one at its new time, a removed one
// never; and a heartbeat may schedule the next.
func TestTimersRunEachHeartbeatAtItsTime(t *testing.T) {
	var timers Timers[*beat]
	start := time.Now()
	const n = 60
	bs := make([]*beat, n)
	due := make([]time.Time, n)
	for i := range bs {
		bs[i] = &beat{timers: &timers, fired: make(chan int64, 8)}
		due[i] = start.Add(time.Second + time.Duration(i%12)*15*time.Millisecond)
	}
	for _, i := range rand.Perm(n) {
		bs[i].schedule(due[i])
	}
	// Moved later, moved earlier (from far off), removed, and one that beats four times.
	later, earlier, removed, again := bs[0], bs[1], bs[2], bs[3]
	due[0] = start.Add(1500 * time.Millisecond)
	later.schedule(due[0])
	earlier.schedule(start.Add(time.Hour))
	due[1] = start.Add(50 * time.Millisecond)
	earlier.schedule(due[1])
	removed.mu.Lock()
	timers.Remove(removed)
	removed.mu.Unlock()
	again.mu.Lock()
	again.again = 3
	again.mu.Unlock()

	for i, b := range bs {
		if b == removed {
			continue
		}
		beats := 1
		if b == again {
			beats = 4
		}
		for range beats {
			select {
			case at := <-b.fired:
				if at < due[i].UnixNano() {
					t.Fatalf("value %d: heartbeat %v before it was due", i, time.Duration(due[i].UnixNano()-at))
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("value %d: no heartbeat", i)
			}
		}
	}
	select {
	case <-removed.fired:
		t.Fatal("a removed value's heartbeat ran")
	case <-time.After(100 * time.Millisecond):
	}
	for _, b := range bs {
		select {
		case <-b.fired:
			t.Fatal("a heartbeat ran twice")
		default:
		}
	}
}
