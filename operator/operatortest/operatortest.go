// Package operatortest helps test the operators' listings.
package operatortest

import "sync"

// Outcomes counts the outcomes a Lister observes (operator.ListOptions.Observe).
type Outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

// Observe counts outcome.
func (o *Outcomes) Observe(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

// Get is how many times outcome was observed.
func (o *Outcomes) Get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}
