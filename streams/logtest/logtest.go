package logtest

import (
	"testing"

	"github.com/ballet/gateway/streams"
)

// Open returns a fresh, empty log; its cleanup is registered on t.
type Open func(t *testing.T) (streams.Log, streams.Appender)

// Run runs the conformance suite against the logs open returns, one test after another.
func Run(t *testing.T, open Open) { run(t, open, false) }

// RunParallel is Run with the tests in parallel, for logs that share nothing and take most of
// a test's time to open (pglog's, each on a database of its own).
func RunParallel(t *testing.T, open Open) { run(t, open, true) }

func run(t *testing.T, open Open, parallel bool) {
	tests := []struct {
		name string
		f    func(t *testing.T, l streams.Log, a streams.Appender)
	}{
		{"EmptyLog", testEmpty},
		{"AppendAndReadAfter", testAppendReadAfter},
		{"ReadAfterPaging", testPaging},
		{"ReadStreamProject", testStreamProject},
		{"ReadStreamItem", testStreamItem},
		{"ReadStreamBounds", testStreamBounds},
		{"NullEntityKey", testNullEntityKey},
		{"PayloadRoundTrip", testPayload},
		{"InvalidEventsAppendNothing", testInvalid},
		{"OccurredAt", testOccurredAt},
		{"WaitWakesOnAppend", testWaitWakes},
		{"WaitReturnsAtOnceWhenBehind", testWaitBehind},
		{"WaitHonoursContext", testWaitCtx},
		{"ConcurrentAppends", testConcurrent},
		{"BadLimit", testBadLimit},
		{"Projects", testProjects},
		{"Subjects", testSubjects},
		{"CloseEndsWait", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			l, a := open(t)
			tc.f(t, l, a)
		})
	}
}
