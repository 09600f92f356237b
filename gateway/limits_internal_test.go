package gateway

import (
	"math"
	"runtime/debug"
	"testing"
)

// The replica's budget for messages not yet whole: the setting, else an eighth of the Go
// memory limit, else 256 MiB; never under one connection's worst.
func TestPartialMessageBytesDefault(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if got := partialMessageBytes(0, 1<<20); got != 256<<20 {
		t.Errorf("without a memory limit: %d, want 256 MiB", got)
	}
	debug.SetMemoryLimit(1800 << 20)
	if got := partialMessageBytes(0, 1<<20); got != 225<<20 {
		t.Errorf("with a 1800 MiB memory limit: %d, want an eighth, 225 MiB", got)
	}
	if got := partialMessageBytes(4<<20, 1<<20); got != 4<<20 {
		t.Errorf("set to 4 MiB: %d", got)
	}
	if got, want := partialMessageBytes(1<<20, 1<<20), int64(2<<20+64<<10); got != want {
		t.Errorf("set to 1 MiB with a read limit of 1 MiB: %d, want %d", got, want)
	}
}
