package gateway

import (
	"math"
	"runtime/debug"
	"testing"
)

// The replica's queued-bytes budget: the setting, else a quarter of the Go memory limit,
// else 1 GiB.
func TestReplicaQueueBytesDefault(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if got := replicaQueueBytes(0); got != 1<<30 {
		t.Errorf("without a memory limit: %d, want 1 GiB", got)
	}
	debug.SetMemoryLimit(1800 << 20)
	if got := replicaQueueBytes(0); got != 450<<20 {
		t.Errorf("with a 1800 MiB memory limit: %d, want a quarter, 450 MiB", got)
	}
	if got := replicaQueueBytes(64 << 20); got != 64<<20 {
		t.Errorf("set to 64 MiB: %d", got)
	}
}
