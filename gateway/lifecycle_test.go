package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// Every path of the session's lifecycle is walked by advance; every other move panics,
// naming both states.
func TestSessionLifecycle(t *testing.T) {
	paths := [][]lifecycle{
		{stateStarted, stateAuthed, stateClosing, stateFinishing, stateClosed},
		{stateStarted, stateRefusing, stateClosing, stateFinishing, stateClosed},
		{stateStarted, stateClosing, stateFinishing, stateClosed},
		{stateClosing, stateFinishing, stateClosed}, // closed before start
	}
	legal := map[[2]lifecycle]bool{}
	for _, path := range paths {
		var s session
		from := stateMade
		for _, to := range path {
			s.advance(to)
			if got := s.lifecycle(); got != to {
				t.Fatalf("advance(%v) from %v: state %v", to, from, got)
			}
			legal[[2]lifecycle{from, to}] = true
			from = to
		}
	}
	for from := stateMade; from <= stateClosed; from++ {
		for to := stateMade; to <= stateClosed; to++ {
			if legal[[2]lifecycle{from, to}] {
				continue
			}
			var s session
			s.state.Store(uint32(from))
			func() {
				defer func() {
					r := recover()
					if want := fmt.Sprintf("from %v to %v", from, to); r == nil || !strings.Contains(fmt.Sprint(r), want) {
						t.Errorf("advance %v → %v: recovered %v, want a panic naming %q", from, to, r, want)
					}
				}()
				s.advance(to)
			}()
			if got := s.lifecycle(); got != from {
				t.Errorf("refused advance %v → %v changed the state to %v", from, to, got)
			}
		}
	}
}
