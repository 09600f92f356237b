package pglisten_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/pglisten"
)

// TestPack: items travel in as few payloads as fit, long ones in fragments cut between UTF-8
// characters, and come out of Unpack as they went in, through Postgres, which refuses a
// payload of 8000 bytes or more and text that is not UTF-8.
func TestPack(t *testing.T) {
	var items []string
	for i := 0; i < 500; i++ {
		items = append(items, fmt.Sprintf("item %d %s", i, strings.Repeat("é", i%40)))
	}
	long := strings.Repeat("aé€😀", 3*pglisten.MaxPayload/10)
	items = slices.Insert(items, 200, long, "")
	payloads, err := pglisten.Pack("sender", items)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range payloads {
		if len(p) > pglisten.MaxPayload {
			t.Fatalf("a payload of %d bytes", len(p))
		}
		total += len(p)
	}
	if min := total/pglisten.MaxPayload + 1; len(payloads) > min+2 {
		t.Fatalf("%d payloads for %d bytes, want about %d", len(payloads), total, min)
	}

	e := newEnv(t)
	in := newInbox()
	e.open(t, []string{"ch"}, in.options())
	if err := pglisten.Notify(t.Context(), e.admin, "ch", payloads...); err != nil {
		t.Fatal(err)
	}
	var u pglisten.Unpacker
	var got []string
	for range payloads {
		head, its, err := u.Unpack(in.next(t).Payload, time.Now())
		if err != nil || head != "sender" {
			t.Fatalf("unpack: head %q, %v", head, err)
		}
		got = append(got, its...)
	}
	if !slices.Equal(got, items) {
		t.Fatalf("unpacked %d items, want the %d packed", len(got), len(items))
	}

	// A fragment whose others never come is dropped by Reset, and one that lies is refused.
	frags, err := pglisten.Pack("", []string{long})
	if err != nil || len(frags) < 2 {
		t.Fatalf("%d fragments, %v", len(frags), err)
	}
	if _, its, err := u.Unpack(frags[0], time.Now()); err != nil || its != nil {
		t.Fatalf("a first fragment: %q %v", its, err)
	}
	u.Reset()
	for _, f := range frags[1:] {
		if _, its, err := u.Unpack(f, time.Now()); err != nil || its != nil {
			t.Fatalf("fragments after a reset: %q %v", its, err)
		}
	}
	for _, bad := range []string{"h\n\x1fid 1", "h\n\x1fid 3 2\nx", "h\n\x1fid x 2\nx", "h\n\x1fid 0 99999\nx"} {
		if _, _, err := u.Unpack(bad, time.Now()); err == nil {
			t.Fatalf("%q unpacked", bad)
		}
	}
	for _, bad := range []string{"two\nlines", "\x1fmarked"} {
		if _, err := pglisten.Pack("h", []string{bad}); !errors.Is(err, pglisten.ErrItem) {
			t.Fatalf("packing %q: %v, want ErrItem", bad, err)
		}
	}
	if _, err := pglisten.Pack("h", []string{strings.Repeat("x", 4097*pglisten.MaxPayload)}); !errors.Is(err, pglisten.ErrItem) {
		t.Fatalf("packing an item of 4097 payloads: %v, want ErrItem", err)
	}
}
