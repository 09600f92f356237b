package gateway

import "net/netip"

// SubjectBudgets is how many subjects have budgets on s: those with an authenticated connection.
func SubjectBudgets(s *Server) int { return s.subjects.Len() }

// Sockets is the number of open sockets s.Listener counts.
func Sockets(s *Server) int {
	open, _, _ := s.sockets.Counts(netip.Addr{})
	return open
}

// AddrSockets is how many sockets and unauthenticated sessions of addr s counts against
// BALLET_MAX_CONNECTIONS_PER_IP.
func AddrSockets(s *Server, addr string) int {
	_, _, n := s.sockets.Counts(netip.MustParseAddr(addr))
	return n
}

// PendingSockets is how many sockets s counts against BALLET_MAX_PENDING_SOCKETS: new, or
// with a request being read or served.
func PendingSockets(s *Server) int {
	_, pending, _ := s.sockets.Counts(netip.Addr{})
	return pending
}

// MethodRequirements returns, by method name, the permission the method table requires on the
// project the params name ("" for none) and whether the method takes a subscription place.
func MethodRequirements() map[string]struct {
	Perm       string
	Subscribes bool
} {
	out := map[string]struct {
		Perm       string
		Subscribes bool
	}{}
	for name, m := range methods {
		out[name] = struct {
			Perm       string
			Subscribes bool
		}{string(m.perm), m.subscribes}
	}
	return out
}
