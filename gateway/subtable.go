package gateway

// subTable is a connection's subscription-id namespace. Most connections
// hold a subscription or two: a few entries live in a slice, and a map
// takes over beyond subTableFew, so that an idle connection does not pay
// for a hash table.
type subTable struct {
	few  []subEntry
	many map[string]*clientSub
}

type subEntry struct {
	id string
	cs *clientSub
}

const subTableFew = 8

func (t *subTable) get(id string) (*clientSub, bool) {
	if t.many != nil {
		cs, ok := t.many[id]
		return cs, ok
	}
	for i := range t.few {
		if t.few[i].id == id {
			return t.few[i].cs, true
		}
	}
	return nil, false
}

// put adds or replaces id.
func (t *subTable) put(id string, cs *clientSub) {
	if t.many != nil {
		t.many[id] = cs
		return
	}
	for i := range t.few {
		if t.few[i].id == id {
			t.few[i].cs = cs
			return
		}
	}
	if len(t.few) < subTableFew {
		t.few = append(t.few, subEntry{id, cs})
		return
	}
	t.many = make(map[string]*clientSub, 2*subTableFew)
	for _, e := range t.few {
		t.many[e.id] = e.cs
	}
	t.many[id] = cs
	t.few = nil
}

func (t *subTable) del(id string) {
	if t.many != nil {
		delete(t.many, id)
		return
	}
	for i := range t.few {
		if t.few[i].id == id {
			last := len(t.few) - 1
			t.few[i] = t.few[last]
			t.few[last] = subEntry{}
			t.few = t.few[:last]
			return
		}
	}
}

func (t *subTable) len() int {
	if t.many != nil {
		return len(t.many)
	}
	return len(t.few)
}

// all returns a copy of the entries.
func (t *subTable) all() []subEntry {
	out := make([]subEntry, 0, t.len())
	if t.many != nil {
		for id, cs := range t.many {
			out = append(out, subEntry{id, cs})
		}
		return out
	}
	return append(out, t.few...)
}

// count returns how many entries are of kind.
func (t *subTable) count(kind string) int {
	n := 0
	if t.many != nil {
		for _, cs := range t.many {
			if cs.kind == kind {
				n++
			}
		}
		return n
	}
	for _, e := range t.few {
		if e.cs.kind == kind {
			n++
		}
	}
	return n
}
