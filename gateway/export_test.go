package gateway

import "net/netip"

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

// AddrSockets is how many sockets and unauthenticated sessions of addr s counts against
// BALLET_MAX_CONNECTIONS_PER_IP.
func AddrSockets(s *Server, addr string) int {
	s.sockets.mu.Lock()
	defer s.sockets.mu.Unlock()
	return s.sockets.addrs[keyOf(netip.MustParseAddr(addr))]
}

// PendingSockets is how many sockets s counts against BALLET_MAX_PENDING_SOCKETS: new, or
// with a request being read or served.
func PendingSockets(s *Server) int {
	s.sockets.mu.Lock()
	defer s.sockets.mu.Unlock()
	return s.sockets.pending
}
