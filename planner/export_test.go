package planner

// Abandon stops s as if its process died mid-turn: nothing is stored, published or
// released any more, and leases are no longer renewed.
func Abandon(s *Service) { s.abandon() }
