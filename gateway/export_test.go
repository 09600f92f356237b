package gateway

// SubjectBudgets is how many subjects have budgets on s: those with an authenticated connection.
func SubjectBudgets(s *Server) int {
	s.subjMu.Lock()
	defer s.subjMu.Unlock()
	return len(s.subjects)
}
