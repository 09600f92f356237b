package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// inCI reports whether the tests run in CI, where a missing tool is a
// failure rather than a reason to skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// need skips the test when a tool is missing locally, and fails it in CI.
func need(t *testing.T, ok bool, what, install string) {
	t.Helper()
	if ok {
		return
	}
	if inCI() {
		t.Fatalf("%s is missing (CI=true): %s", what, install)
	}
	t.Skipf("%s is missing: %s", what, install)
}

// nodeModules requires node and web/node_modules with the named packages.
func nodeModules(t *testing.T, pkgs ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	need(t, err == nil, "node", "install Node.js 20 or later")
	for _, p := range pkgs {
		_, err := os.Stat(filepath.Join("node_modules", p, "package.json"))
		need(t, err == nil, "web/node_modules/"+p, "run npm ci --prefix web")
	}
	return node
}
