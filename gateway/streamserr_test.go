package gateway

import (
	"fmt"
	"testing"

	"github.com/ballet/gateway/streams"
)

// A refusal of package streams reaches the client as its detail, without the sentinel's
// words or what wrapped it.
func TestStreamsErrorWords(t *testing.T) {
	_, bad := streams.ParseTypes([]string{"a*b"})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{bad, `types[0] may have "*" only at its end`},
		{fmt.Errorf("wrapped: %w", &streams.Error{Err: streams.ErrResyncRequired, Detail: "subscribe project:WEB: from_seq 9 is beyond the log head 3"}),
			"subscribe project:WEB: from_seq 9 is beyond the log head 3"},
	} {
		if got := streamsDetail(tc.err); got != tc.want {
			t.Errorf("streamsDetail(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
