package subscribers

import "sync"

// Set holds callbacks of T. The zero value is empty and ready; a Set must not be copied.
type Set[T any] struct {
	mu   sync.Mutex // held while callbacks are called
	fns  map[int]func(T)
	next int
}

// Subscribe adds fn and returns the function that removes it.
func (s *Set[T]) Subscribe(fn func(T)) (unsubscribe func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(T){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.fns, id)
	}
}

// Publish calls every callback with v and returns once they all returned.
func (s *Set[T]) Publish(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fn := range s.fns {
		fn(v)
	}
}
