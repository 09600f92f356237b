package gateway

import (
	"slices"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/protocol"
)

// TestMethodsAreTheTable: the gateway has a handler for each method the protocol table says
// it serves and for no other, and labels its metrics by every name of the table.
func TestMethodsAreTheTable(t *testing.T) {
	served := protocol.Names(protocol.Served)
	for _, name := range served {
		if _, ok := methods[name]; !ok {
			t.Errorf("the protocol table's %s has no handler in methods", name)
		}
	}
	for name := range methods {
		if !slices.Contains(served, name) {
			t.Errorf("methods serves %s, which the protocol table does not list as Served", name)
		}
	}
	for _, name := range protocol.Names(protocol.Served | protocol.Sent) {
		if got := methodLabel(name); got != name {
			t.Errorf("methodLabel(%s) = %s", name, got)
		}
	}
	if got := methodLabel("no.such"); got != "other" {
		t.Errorf("methodLabel of a method outside the table = %s", got)
	}
}

// TestCallServed: Handle refuses a success whose handler skipped its entry's requirements.
func TestCallServed(t *testing.T) {
	for _, tc := range []struct {
		m       method
		checked bool
		placed  bool
		want    bool
	}{
		{method{}, false, false, true},
		{method{perm: auth.PermRead}, false, false, false},
		{method{perm: auth.PermRead}, true, false, true},
		{method{subscribes: true, perm: auth.PermRead}, true, false, false},
		{method{subscribes: true, perm: auth.PermRead}, true, true, true},
		{method{subscribes: true}, false, true, true},
	} {
		c := &call{m: &tc.m}
		c.checked.Store(tc.checked)
		if tc.placed {
			c.cs = &clientSub{}
		}
		if got := c.served(); got != tc.want {
			t.Errorf("perm %q subscribes %v, checked %v, placed %v: served %v, want %v",
				tc.m.perm, tc.m.subscribes, tc.checked, tc.placed, got, tc.want)
		}
	}
}
