package gateway

import "time"

// SetFlushStall makes the connections accepted from now on wait d (instead of 30 s) for a
// peer that takes nothing, until restore.
func SetFlushStall(d time.Duration) (restore func()) {
	old := flushStallOverride.Swap(int64(d))
	return func() { flushStallOverride.Store(old) }
}
