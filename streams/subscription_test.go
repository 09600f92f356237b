package streams

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/fault"
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

// Replay runs before a replay reads anything and learns what it read: the stream's events
// after from_seq, selected by Types or not, and one more than ReplayLimit when there are
// too many. When it fails, nothing is read or sent and the subscription leaves the hub.
func TestReplayHook(t *testing.T) {
	l := &sliceLog{}
	for seq := int64(1); seq <= 6; seq++ {
		l.evs = append(l.evs, testEvent(seq, "item.updated", "P-1", `{}`))
	}
	p := Stream{Kind: StreamProject, Key: "P"}
	none, _ := ParseTypes([]string{"presence.only"})
	errRefused := errors.New("refused")
	for _, tc := range []struct {
		name     string
		from     int64
		types    *TypeFilter
		refuse   error
		wantRead string // the counts read was called with
		wantSent string
		wantErr  error
	}{
		{name: "replayed", from: 2, wantRead: "[4]", wantSent: "[3 4 5 6]"},
		{name: "filtered", from: 2, types: none, wantRead: "[4]", wantSent: "[]"},
		{name: "nothing to replay", from: 6, wantRead: "[0]", wantSent: "[]"},
		{name: "too many", from: 0, wantRead: "[6]", wantSent: "[]", wantErr: ErrResyncRequired},
		{name: "refused", from: 2, refuse: errRefused, wantRead: "[]", wantSent: "[]", wantErr: errRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(nil)
			r := newRecSender(codec.JSON)
			l.reads = 0
			var read []int
			sub, _, err := h.Subscribe(context.Background(), l, SubscribeRequest{
				ID: "s", Subject: "alice", Stream: p, Codec: codec.JSON, Out: r, FromSeq: &tc.from, Types: tc.types, ReplayLimit: 5,
				Replay: func(context.Context) (func(int), error) {
					if len(read) != 0 || l.reads != 0 {
						t.Error("Replay called after the replay read")
					}
					return func(n int) { read = append(read, n) }, tc.refuse
				},
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Subscribe: %v, want %v", err, tc.wantErr)
			}
			if got := fmt.Sprint(read); got != tc.wantRead {
				t.Fatalf("read %s, want %s", got, tc.wantRead)
			}
			if got := fmt.Sprint(r.got("s")); got != tc.wantSent {
				t.Fatalf("sent %s, want %s", got, tc.wantSent)
			}
			if err != nil && (h.Count() != 0 || tc.refuse != nil && l.reads != 0) {
				t.Fatalf("%d subscriptions left in the hub, %d reads", h.Count(), l.reads)
			}
			if sub != nil {
				h.Unsubscribe(sub)
			}
		})
	}
}

// failingLog is a sliceLog whose Head or ReadStream fail.
type failingLog struct {
	sliceLog
	head, read error
}

func (l *failingLog) Head(ctx context.Context) (int64, error) {
	if l.head != nil {
		return 0, l.head
	}
	return l.sliceLog.Head(ctx)
}

func (l *failingLog) ReadStream(ctx context.Context, s Stream, after, upto int64, limit int) ([]Event, error) {
	if l.read != nil {
		return nil, l.read
	}
	return l.sliceLog.ReadStream(ctx, s, after, upto, limit)
}

// Whichever step of Subscribe fails, the subscription leaves the hub having sent nothing,
// nobody is told it closed, and the head returned is the one the error speaks of.
func TestSubscribeFailureLeavesNothing(t *testing.T) {
	errLog := errors.New("log down")
	var evs []Event
	for seq := int64(1); seq <= 6; seq++ {
		evs = append(evs, testEvent(seq, "item.updated", "P-1", `{}`))
	}
	for _, tc := range []struct {
		name     string
		log      *failingLog
		ctx      context.Context
		from     int64
		limit    int
		wantErr  error
		wantHead int64
		detail   string // the error's, for a client
	}{
		{name: "head", log: &failingLog{head: errLog}, from: 0, wantErr: errLog},
		{name: "beyond the head", from: 7, wantErr: ErrResyncRequired, wantHead: 6,
			detail: "subscribe project:P: from_seq 7 is beyond the log head 6"},
		{name: "read", log: &failingLog{read: errLog}, from: 0, wantErr: errLog},
		{name: "too many", from: 0, limit: 5, wantErr: ErrResyncRequired, wantHead: 6,
			detail: "subscribe project:P: more than 5 events after from_seq 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.log
			if l == nil {
				l = &failingLog{}
			}
			l.evs = evs
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			h := NewHub(nil)
			r := newRecSender(codec.JSON)
			r.hold = true
			cl := &closings{reasons: map[string]string{}}
			from := tc.from
			sub, head, err := h.Subscribe(ctx, l, SubscribeRequest{
				ID: "s", Subject: "alice", Stream: Stream{Kind: StreamProject, Key: "P"}, Codec: codec.JSON,
				Out: r, FromSeq: &from, ReplayLimit: tc.limit, OnClosed: cl.record,
			})
			if !errors.Is(err, tc.wantErr) || sub != nil || head != tc.wantHead {
				t.Fatalf("Subscribe = %v, %d, %v; want nil, %d, %v", sub, head, err, tc.wantHead, tc.wantErr)
			}
			if tc.detail != "" {
				var e *fault.Error
				if !errors.As(err, &e) || e.Kind != fault.Resync || e.Detail != tc.detail || err.Error() != tc.detail {
					t.Fatalf("error %q (%#v), want a resync of detail %q", err, e, tc.detail)
				}
			}
			h.Dispatch([]Event{testEvent(7, "item.updated", "P-1", `{}`)})
			if h.Count() != 0 || len(cl.get()) != 0 {
				t.Fatalf("%d subscriptions left in the hub, closings %v", h.Count(), cl.get())
			}
			if tc.ctx == nil {
				if got := fmt.Sprint(r.got("s")); got != "[]" {
					t.Fatalf("sent %s, want nothing", got)
				}
			}
		})
	}
}
