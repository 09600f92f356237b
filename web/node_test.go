package web

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNodeUnit runs the client's and the board model's unit tests under
// Node's test runner (they use a fake server over the ws package).
func TestNodeUnit(t *testing.T) {
	node := nodeModules(t, "@msgpack/msgpack", "ws")
	files, err := filepath.Glob("test/*.test.js")
	if err != nil || len(files) == 0 {
		t.Fatalf("no unit tests under web/test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}
