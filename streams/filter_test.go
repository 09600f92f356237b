package streams

import (
	"errors"
	"strings"
	"testing"

	"github.com/ballet/gateway/internal/fault"
)

func TestTypeFilter(t *testing.T) {
	f, err := ParseTypes([]string{"item.*", "dependency.added", "planner.*"})
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]bool{
		"item.created": true, "item.state_changed": true, "item.": true, "items.x": false, "item": false,
		"dependency.added": true, "dependency.removed": false, "planner.message": true, "member.revoked": false,
	} {
		if got := f.Match(typ); got != want {
			t.Errorf("Match(%q) = %v, want %v", typ, got, want)
		}
	}
	all, err := ParseTypes([]string{"*"})
	if err != nil || !all.Match("anything") {
		t.Fatalf("* : %v", err)
	}
	var none *TypeFilter
	if !none.Match("x") {
		t.Fatal("a nil filter left an event out")
	}
	if f, err := ParseTypes(nil); f != nil || err != nil {
		t.Fatalf("no types: %v %v", f, err)
	}
	for _, bad := range [][]string{
		{}, {""}, {"a*b"}, {"**"}, {strings.Repeat("x", MaxTypePattern+1)}, {"bad\x00"},
		make([]string, MaxTypePatterns+1),
	} {
		if _, err := ParseTypes(bad); !errors.Is(err, ErrBadTypes) {
			t.Errorf("ParseTypes(%q) = %v, want ErrBadTypes", bad, err)
		}
	}
	// What is wrong is the error's detail, for a client, of an invalid argument.
	_, err = ParseTypes([]string{"ok", "a*b"})
	var e *fault.Error
	if !errors.As(err, &e) || e.Kind != fault.Invalid || e.Detail != `types[1] may have "*" only at its end` || err.Error() != e.Detail {
		t.Fatalf("ParseTypes: %q (%#v), want an invalid argument naming types[1]", err, e)
	}
}
