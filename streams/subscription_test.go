package streams

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ballet/gateway/codec"
)

// Admit runs with the subscription registered and before anything is delivered: what is
// dispatched meanwhile waits for it, a loss of access dispatched meanwhile closes the
// subscription, and when it fails the subscription leaves the hub having sent nothing.
func TestAdmit(t *testing.T) {
	l := &sliceLog{}
	for seq := int64(1); seq <= 3; seq++ {
		l.evs = append(l.evs, testEvent(seq, "item.updated", "P-1", `{}`))
	}
	p := Stream{Kind: StreamProject, Key: "P"}
	errDenied := errors.New("denied")
	for _, tc := range []struct {
		name    string
		during  Event // dispatched while Admit runs
		err     error // Admit's answer
		want    string
		closed  string
		wantErr error
	}{
		{name: "admitted", during: testEvent(4, "item.updated", "P-1", `{}`), want: "[2 3 4 5]"},
		{name: "denied", during: testEvent(4, "item.updated", "P-1", `{}`), err: errDenied, want: "[]", wantErr: errDenied},
		{name: "revoked meanwhile", during: testEvent(4, "member.revoked", "", `{"subject":"alice"}`), want: "[]", closed: ReasonForbidden},
		{name: "deleted meanwhile", during: testEvent(4, "project.deleted", "", `{}`), want: "[]", closed: ReasonNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(nil)
			r := newRecSender(codec.JSON)
			cl := &closings{reasons: map[string]string{}}
			from := int64(1)
			var during string
			_, head, err := h.Subscribe(context.Background(), l, SubscribeRequest{
				ID: "s", Subject: "alice", Stream: p, Codec: codec.JSON, Out: r, FromSeq: &from, OnClosed: cl.record,
				Admit: func(context.Context) error {
					h.Dispatch([]Event{tc.during})
					during = fmt.Sprint(r.got("s"))
					return tc.err
				},
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Subscribe: %v, want %v", err, tc.wantErr)
			}
			if err == nil && head != 3 {
				t.Fatalf("head %d, want 3", head)
			}
			if during != "[]" {
				t.Fatalf("sent %s before Admit returned", during)
			}
			h.Dispatch([]Event{testEvent(5, "item.updated", "P-1", `{}`)})
			if got := fmt.Sprint(r.got("s")); got != tc.want {
				t.Fatalf("sent %s, want %s", got, tc.want)
			}
			if got := cl.get()["s"]; got != tc.closed {
				t.Fatalf("closed %q, want %q", got, tc.closed)
			}
			if tc.wantErr != nil && h.Count() != 0 {
				t.Fatalf("%d subscriptions left in the hub", h.Count())
			}
		})
	}
}
