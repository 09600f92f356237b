package gateway

import "fmt"

// lifecycle is where a session is in its life. It only moves forward, by advance:
//
//	stateMade      made and upgraded; start has not run. closeWith leaves finish to start.
//	stateStarted   start ran: the reader runs, the auth timer and heartbeats tick.
//	stateAuthed    auth succeeded: the principal is set and other methods are served.
//	stateRefusing  a message before auth was answered with an error; the reader reads no
//	               further, and closeWith follows the answer.
//	stateClosing   closeWith was called: the close code is final, finish is under way.
//	stateFinishing finish runs: the timers are stopped, the socket is closing.
//	stateClosed    the subscription table takes no new entry.
//
//	made     → started   start
//	made     → closing   closeWith before start (start then runs finish)
//	started  → authed    auth
//	started  → refusing  refuse (a failed auth, a refused subject, another method first)
//	started  → closing   closeWith
//	authed   → closing   closeWith
//	refusing → closing   closeWith
//	closing  → finishing finish
//	finishing → closed   finish, once the socket is closed
type lifecycle uint32

const (
	stateMade lifecycle = iota
	stateStarted
	stateAuthed
	stateRefusing
	stateClosing
	stateFinishing
	stateClosed
)

var lifecycleNames = [...]string{"made", "started", "authed", "refusing", "closing", "finishing", "closed"}

func (l lifecycle) String() string {
	if int(l) < len(lifecycleNames) {
		return lifecycleNames[l]
	}
	return fmt.Sprintf("lifecycle(%d)", uint32(l))
}

// next is, for each state, the states it may move to: one bit a state.
var next = [...]uint8{
	stateMade:      1<<stateStarted | 1<<stateClosing,
	stateStarted:   1<<stateAuthed | 1<<stateRefusing | 1<<stateClosing,
	stateAuthed:    1 << stateClosing,
	stateRefusing:  1 << stateClosing,
	stateClosing:   1 << stateFinishing,
	stateFinishing: 1 << stateClosed,
}

// lifecycle is the session's state now; under s.mu it stays so.
func (s *session) lifecycle() lifecycle { return lifecycle(s.state.Load()) }

// advance moves the session to the state to, under s.mu; a move the lifecycle does not have
// is a bug, and panics naming both states.
func (s *session) advance(to lifecycle) {
	from := s.lifecycle()
	if int(from) >= len(next) || next[from]&(1<<to) == 0 {
		panic(fmt.Sprintf("gateway: session cannot go from %v to %v", from, to))
	}
	s.state.Store(uint32(to))
}
