package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/fault"
)

// Each kind's JSON-RPC code, HTTP status and error.type, bare and wrapped; and an error of no
// kind, and nil.
func TestWire(t *testing.T) {
	for _, tc := range []struct {
		kind   fault.Kind
		code   int
		msg    string // the code's own words
		status int
		typ    string
	}{
		{fault.Internal, -32603, "internal error", 500, "_OTHER"},
		{fault.NotFound, -32004, "not found", 404, "not_found"},
		{fault.Forbidden, -32003, "forbidden", 403, "forbidden"},
		{fault.Conflict, -32009, "conflict", 409, "conflict"},
		{fault.Precondition, -32009, "conflict", 412, "precondition_failed"},
		{fault.Invalid, -32602, "invalid params", 422, "invalid"},
		{fault.Limit, -32029, "limit exceeded", 429, "limit_exceeded"},
		{fault.Resync, -32010, "resync required", 409, "resync_required"},
		{fault.Unavailable, -32603, "internal error", 503, "unavailable"},
	} {
		sentinel := fault.New(tc.kind, "test: sentinel")
		for _, err := range []error{sentinel, fault.Errorf(sentinel, "thing %d", 7), fmt.Errorf("store: %w", sentinel)} {
			if c := fault.Code(err); c.ErrorCode() != tc.code || c.Error() != tc.msg {
				t.Errorf("Code(%v) of kind %d = %d %q, want %d %q", err, tc.kind, c.ErrorCode(), c.Error(), tc.code, tc.msg)
			}
			if s := fault.HTTPStatus(err); s != tc.status {
				t.Errorf("HTTPStatus(%v) of kind %d = %d, want %d", err, tc.kind, s, tc.status)
			}
			if typ := fault.ErrorType(err); typ != tc.typ {
				t.Errorf("ErrorType(%v) of kind %d = %q, want %q", err, tc.kind, typ, tc.typ)
			}
		}
	}
	other := errors.New("connection refused")
	if fault.Code(other).ErrorCode() != -32603 || fault.HTTPStatus(other) != 500 || fault.ErrorType(other) != "_OTHER" {
		t.Error("an error of no kind is not internal")
	}
	if fault.Code(nil) != nil || fault.HTTPStatus(nil) != 200 || fault.ErrorType(nil) != "" {
		t.Error("nil is not a success")
	}
}

// A sentinel is matched by the errors made from it, not by another of its kind; the detail is
// what the caller reads, the sentinel's text only what the logs read.
func TestSentinels(t *testing.T) {
	a, b := fault.New(fault.NotFound, "a: not found"), fault.New(fault.NotFound, "b: not found")
	err := fmt.Errorf("load: %w", fault.Errorf(a, "session %s not found", "s1"))
	if !errors.Is(err, a) || errors.Is(err, b) {
		t.Fatalf("%v matches a: %v, b: %v", err, errors.Is(err, a), errors.Is(err, b))
	}
	if fault.KindOf(err) != fault.NotFound || fault.Detail(err) != "session s1 not found" || err.Error() != "load: session s1 not found" {
		t.Fatalf("%v: kind %d, detail %q", err, fault.KindOf(err), fault.Detail(err))
	}
	bare := fmt.Errorf("pgx: no rows: %w", a)
	if fault.Detail(bare) != "" || bare.Error() != "pgx: no rows: a: not found" {
		t.Fatalf("a bare sentinel: detail %q, text %q", fault.Detail(bare), bare.Error())
	}
	cause := errors.New("invalid subject")
	w := fault.Wrap(fault.Invalid, cause, "the subject must be text")
	if !errors.Is(w, cause) || fault.KindOf(w) != fault.Invalid || w.Error() != "the subject must be text" {
		t.Fatalf("Wrap: %v", w)
	}
	if fault.KindOf(nil) != fault.Internal || fault.Detail(cause) != "" {
		t.Fatal("no kind and no detail expected")
	}
}

// A limit's refusal names the limit, its value and when to retry; other errors name none.
func TestLimited(t *testing.T) {
	e := &fault.Error{Kind: fault.Limit, Detail: "at most 2", Limit: "planner_turns", Max: 2, RetryAfter: time.Second}
	if name, max, retry := e.Limited(); name != "planner_turns" || max != 2 || retry != time.Second {
		t.Fatalf("Limited() = %q %d %v", name, max, retry)
	}
	if name, _, _ := fault.New(fault.Invalid, "x").Limited(); name != "" {
		t.Fatalf("a sentinel names the limit %q", name)
	}
}
