package httpapi

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/heaptest"
)

// An address's budget: upgrades spend it and are refused once it is empty; failures put it in
// debt, down to minus its burst, and a check refuses it until it is paid back; a check spends
// nothing and keeps nothing for an address it does not know.
func TestAddrBudget(t *testing.T) {
	l, clock := newRate(RateOptions{Rate: 2, Limit: "unauthenticated"})
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::")
	for i := range 10 {
		if err := l.CheckAddr(a); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if l.Tracked() != 0 {
		t.Fatalf("checks kept %d budgets", l.Tracked())
	}
	for i := range 4 {
		if err := l.AdmitAddr(a); err != nil {
			t.Fatalf("upgrade %d: %v", i, err)
		}
	}
	if err := l.AdmitAddr(a); err == nil {
		t.Fatal("a fifth upgrade in a burst of 4 admitted")
	}
	if err := l.CheckAddr(a); err != nil {
		t.Fatalf("an empty budget, no failure: %v", err)
	}
	for range 10 {
		l.ChargeAddr(a)
	}
	err := l.CheckAddr(a)
	if err == nil {
		t.Fatal("a check in debt admitted")
	}
	if name, max, retry := err.(Limited).Limited(); name != "unauthenticated" || max != 2 || retry != 2*time.Second {
		t.Fatalf("Limited() = %q %d %v, want the debt of 4 at 2 a second", name, max, retry)
	}
	if err := l.CheckAddr(b); err != nil {
		t.Fatalf("another address: %v", err)
	}
	clock.t = clock.t.Add(2 * time.Second)
	if err := l.CheckAddr(a); err != nil {
		t.Fatalf("paid back: %v", err)
	}
}

// The worst case of the per-address budgets: 100,000 addresses at once, each an entry of a
// hash and a budget.
func TestAddrBudgetsBytes(t *testing.T) {
	const n = 100_000
	l, _ := newRate(RateOptions{})
	before := heaptest.LiveHeap()
	for i := range n {
		if err := l.AdmitAddr(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	grew := heaptest.LiveHeap() - before
	if l.Tracked() != n {
		t.Fatalf("%d tracked, want %d", l.Tracked(), n)
	}
	if err := l.AdmitAddr(netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Fatal("an address beyond the bound admitted")
	}
	if limit := int64(n * 100); grew > limit {
		t.Fatalf("the heap grew %d bytes for %d addresses, more than %d", grew, n, limit)
	}
	t.Logf("%d addresses: %d bytes (%d each)", n, grew, grew/n)
}
