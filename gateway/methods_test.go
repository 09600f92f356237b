package gateway

import (
	"slices"
	"testing"

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
