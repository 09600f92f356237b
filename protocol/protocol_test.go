package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range table {
		if m.Name == "" || seen[m.Name] {
			t.Errorf("%q: empty or twice in the table", m.Name)
		}
		seen[m.Name] = true
		if m.Dir&(Served|Sent) == 0 || m.Dir&^(Served|Sent) != 0 {
			t.Errorf("%s: direction %b", m.Name, m.Dir)
		}
		if m.Dir&Sent != 0 && !m.Notification {
			t.Errorf("%s: the gateway sends only notifications", m.Name)
		}
		if got, ok := Lookup(m.Name); !ok || got != m {
			t.Errorf("Lookup(%s) = %v, %v", m.Name, got, ok)
		}
	}
	if _, ok := Lookup("no.such"); ok {
		t.Error("Lookup found a method that is not in the table")
	}
	all := Names(Served | Sent)
	if len(all) != len(table) || !slices.IsSorted(all) {
		t.Errorf("Names(Served|Sent) = %v", all)
	}
	if served, sent := Names(Served), Names(Sent); !slices.Contains(served, Heartbeat) || !slices.Contains(sent, Heartbeat) ||
		slices.Contains(served, StreamEvent) || slices.Contains(sent, Auth) {
		t.Errorf("served %v, sent %v", served, sent)
	}
}

// coded is another package's error with a code, as package rpc's are.
type coded int

func (c coded) Error() string  { return "coded" }
func (c coded) ErrorCode() int { return int(c) }

func TestCodes(t *testing.T) {
	names := map[string]bool{}
	for _, c := range Codes() {
		// JSON-RPC leaves -32000 to -32099 to the server's own errors.
		if c > -32000 || c < -32099 {
			t.Errorf("%d: outside the server's range", c)
		}
		if names[c.Error()] || c.Error() == fmt.Sprint("error ", int(c)) {
			t.Errorf("%d: name %q missing or twice", c, c.Error())
		}
		names[c.Error()] = true
		if !errors.Is(fmt.Errorf("wrapped: %w", c), c) || !errors.Is(c, coded(c)) || errors.Is(c, coded(c-1)) {
			t.Errorf("%d does not match by code", c)
		}
	}
	if ErrNotFound.Error() != "not found" || Code(-32050).Error() != "error -32050" {
		t.Errorf("names: %q, %q", ErrNotFound.Error(), Code(-32050).Error())
	}
}

// TestTableTypes: every method has params, every request a result and no notification one, and
// each type is a struct whose keys are named, once each.
func TestTableTypes(t *testing.T) {
	for _, m := range table {
		request := m.Dir&Served != 0 && !m.Notification
		if m.Params == nil || (m.Result != nil) != request {
			t.Errorf("%s: params %v, result %v (a request: %v)", m.Name, m.Params, m.Result, request)
		}
		for _, typ := range []reflect.Type{m.Params, m.Result} {
			if typ == nil {
				continue
			}
			if typ.Kind() != reflect.Struct {
				t.Errorf("%s: %s is no struct", m.Name, typ)
				continue
			}
			seen := map[string]bool{}
			for _, f := range Fields(typ) {
				if f.Name == "" || seen[f.Name] {
					t.Errorf("%s: %s has the key %q unnamed or twice", m.Name, typ, f.Name)
				}
				seen[f.Name] = true
			}
		}
	}
	if got := Fields(reflect.TypeFor[EventParams]()); len(got) != 9 || got[0].Name != "subscription" || got[1].Name != "seq" {
		t.Errorf("EventParams' keys: %+v", got)
	}
}

// TestLimitNames: LimitData's enum tag lists the Limit constants, once each.
func TestLimitNames(t *testing.T) {
	want := []string{LimitSubscriptions, LimitRequests, LimitSubjectRequests, LimitReplay,
		LimitConnectionsPerSubject, LimitPlannerTurns}
	for _, f := range Fields(reflect.TypeFor[LimitData]()) {
		if f.Name == "limit" && !slices.Equal(f.Enum, want) {
			t.Errorf("LimitData.limit's enum tag %v, the constants %v", f.Enum, want)
		}
	}
}
