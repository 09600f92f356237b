package gateway

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/rpc"
)

// The planner's errors reach the client with its caller-safe detail, or the
// code's own words, never the wrapped error's text.
func TestPlannerErrorWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
	}{
		{fault.Errorf(planner.ErrNotFound, "session s1 not found"), -32004, "session s1 not found"},
		{fmt.Errorf("load: %w", fault.Errorf(planner.ErrInvalid, "text must not be empty")), -32602, "text must not be empty"},
		{fmt.Errorf("lease row 7: pq: deadlock detected: %w", planner.ErrConflict), -32009, "conflict"},
		{fmt.Errorf("pgx: relation planner_sessions: %w", planner.ErrNotFound), -32004, "not found"},
		{planner.ErrForbidden, -32003, "forbidden"},
		{planner.ErrInvalid, -32602, "invalid params"},
		{fmt.Errorf("send: %w", planner.ErrClosed), 0, ""},
		{errors.New("connection refused"), 0, ""},
	} {
		err := plannerError("planner.send", tc.err)
		var e *rpc.Error
		if tc.code == 0 {
			if rpc.Code(err) != 0 {
				t.Errorf("%v: code %d, want none (-32603 on the wire)", tc.err, rpc.Code(err))
			}
			continue
		}
		if !errors.As(err, &e) || e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("%v: got %#v, want %d %q", tc.err, err, tc.code, tc.msg)
		}
	}
}
