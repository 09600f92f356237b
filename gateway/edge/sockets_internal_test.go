package edge

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The bound of sockets before a session: the setting, else a sixteenth of the replica's
// places, at least 1024.
func TestMaxPendingSocketsDefault(t *testing.T) {
	for _, tc := range []struct{ set, conns, want int }{
		{0, 100_000, 6_250}, {0, 400, 1024}, {32, 100_000, 32},
	} {
		if got := maxPendingSockets(tc.set, tc.conns); got != tc.want {
			t.Errorf("set %d, %d places: %d, want %d", tc.set, tc.conns, got, tc.want)
		}
	}
}

// A logged path keeps its first maxLoggedPath characters, the cut marked.
func TestLoggedPath(t *testing.T) {
	short := strings.Repeat("é", maxLoggedPath)
	if got := loggedPath(short); got != short {
		t.Errorf("a path of %d characters was cut", maxLoggedPath)
	}
	if got := loggedPath(short + "/x"); got != short+"…" {
		t.Errorf("a longer path logged as %d characters", utf8.RuneCountInString(got))
	}
}
