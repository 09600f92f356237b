// An operator's sign-out or block closes the subject's connections on the replica
// (operator.ApplySubjectEvent calls CloseSubject).

package gateway

import "github.com/ballet/gateway/operator"

var _ operator.SubjectCloser = (*Server)(nil)

// CloseSubject closes every authenticated connection of subject with 4001 and reason, counted
// in ballet_gateway_operator_closes_total, and returns how many it closed.
func (s *Server) CloseSubject(subject, reason string) int {
	n := 0
	// The subject's own connections, not every session: a sign-out applied before the
	// snapshot is seen by the auth of a connection not in it (authn.go).
	for _, sess := range s.subjects.Conns(subject) {
		sess.mu.Lock()
		match := sess.principal != nil && sess.principal.Subject == subject && sess.lifecycle() < stateClosing
		sess.mu.Unlock()
		if match {
			sess.closeWith(StatusUnauthenticated, reason)
			n++
		}
	}
	if n > 0 {
		s.metrics.OperatorCloses.Add(float64(n))
		s.logger.Info("connections closed by an operator", "subject", subject, "reason", reason, "connections", n)
	}
	return n
}
