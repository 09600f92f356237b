package gateway

import (
	"fmt"
	"testing"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams"
)

// A refusal of package streams reaches the client as its detail, without the sentinel's
// words or what wrapped it, with its kind's code.
func TestStreamsErrorWords(t *testing.T) {
	_, bad := streams.ParseTypes([]string{"a*b"})
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{bad, -32602, `types[0] may have "*" only at its end`},
		{fmt.Errorf("wrapped: %w", fault.Errorf(streams.ErrResyncRequired, "subscribe project:WEB: from_seq 9 is beyond the log head 3")),
			-32010, "subscribe project:WEB: from_seq 9 is beyond the log head 3"},
	} {
		if got, code := fault.Detail(tc.err), fault.Code(tc.err).ErrorCode(); got != tc.want || code != tc.code {
			t.Errorf("%q: detail %q, code %d; want %q, %d", tc.err, got, code, tc.want, tc.code)
		}
	}
}
