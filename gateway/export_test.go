package gateway

// SubjectBudgets is how many subjects have budgets on s: those with an authenticated connection.
func SubjectBudgets(s *Server) int {
	s.subjMu.Lock()
	defer s.subjMu.Unlock()
	return len(s.subjects)
}

// Sockets is the number of open sockets s.Listener counts.
func Sockets(s *Server) int {
	s.sockets.mu.Lock()
	defer s.sockets.mu.Unlock()
	return s.sockets.open
}
