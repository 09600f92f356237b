package gateway

import "time"

// SetFlushStall makes the connections accepted from now on wait d (instead of 30 s) for a
// peer that takes nothing, until restore.
func SetFlushStall(d time.Duration) (restore func()) {
	old := flushStallOverride.Swap(int64(d))
	return func() { flushStallOverride.Store(old) }
}

// SubjectBudgets is how many subjects have budgets on s: those with an authenticated connection.
func SubjectBudgets(s *Server) int {
	s.subjMu.Lock()
	defer s.subjMu.Unlock()
	return len(s.subjects)
}
