// Package leaktest fails a test binary that leaves goroutines of this module
// running after its tests finish.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

const module = "github.com/ballet/gateway/"

// Main runs the tests, then the cleanups (servers shared by the tests), then
// waits up to thirty seconds (a loaded machine can take a while to end them)
// for goroutines started by this module's code to end, and fails the binary
// if any remain.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if code == 0 {
		if leaked := wait(30 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines left running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Check fails t if goroutines of this module are still running after the
// grace period (for use at the end of one test).
func Check(t testing.TB, grace time.Duration) {
	t.Helper()
	if leaked := wait(grace); leaked != "" {
		t.Fatalf("goroutines left running:\n%s", leaked)
	}
}

func wait(grace time.Duration) string {
	deadline := time.Now().Add(grace)
	for {
		leaked := leakedStacks()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leakedStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, module) || strings.Contains(g, "internal/leaktest.") ||
			strings.Contains(g, "testing.(*M).Run") || strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "testing.runFuzzing") || strings.Contains(g, "testing.(*F)") {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}
