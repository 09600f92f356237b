package gateway

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// subTable behaves as a map, below and above the size where it switches.
func TestSubTableIsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tab subTable
	ref := map[string]*clientSub{}
	for step := range 20000 {
		id := fmt.Sprint("s", rng.IntN(3+step/1000))
		switch rng.IntN(3) {
		case 0:
			cs := &clientSub{kind: id}
			tab.put(id, cs)
			ref[id] = cs
		case 1:
			tab.del(id)
			delete(ref, id)
		}
		got, ok := tab.get(id)
		if want, wok := ref[id]; got != want || ok != wok {
			t.Fatalf("step %d: get(%s) = %v %v, want %v %v", step, id, got, ok, want, wok)
		}
		if tab.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(ref))
		}
	}
	var ids []string
	for _, e := range tab.all() {
		if ref[e.id] != e.cs {
			t.Fatalf("all() has %s → %v, want %v", e.id, e.cs, ref[e.id])
		}
		ids = append(ids, e.id)
	}
	sort.Strings(ids)
	if len(ids) != len(ref) {
		t.Fatalf("all() has %d entries, want %d", len(ids), len(ref))
	}
	if tab.many == nil {
		t.Fatal("the table never grew past its slice")
	}
}
