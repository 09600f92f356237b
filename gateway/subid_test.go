package gateway

import (
	"strings"
	"testing"

	"github.com/ballet/gateway/rpc"
)

// A subscription id is 1 to 64 characters (not bytes) of text.
func TestCheckSubID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{strings.Repeat("é", 64), true}, // 128 bytes
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("é", 65), false},
		{"bad\x00", false},
		{"\xff", false},
	} {
		err := checkSubID(tc.id)
		if (err == nil) != tc.ok || (err != nil && rpc.Code(err) != rpc.ErrInvalidParams.Code) {
			t.Errorf("checkSubID(%q) = %v, want ok %v (else -32602)", tc.id, err, tc.ok)
		}
	}
}
