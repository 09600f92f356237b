package web

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/apigen"
)

// TestTypeDeclarations: the browser client's TypeScript declarations
// (src/client/types, generated from the sources' JSDoc by `make -C web
// types`) are current, and a typed usage of the package compiles under
// `tsc --strict` against them.
func TestTypeDeclarations(t *testing.T) {
	node := nodeModules(t, "typescript", "@msgpack/msgpack")
	tsc := filepath.Join("node_modules", "typescript", "bin", "tsc")
	run := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{tsc}, args...)...)
		cmd.WaitDelay = 5 * time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tsc %v: %v\n%s", args, err, out)
		}
	}
	fresh := t.TempDir()
	run("-p", "src/client/tsconfig.json", "--outDir", fresh)
	committed := "src/client/types"
	want := readTree(t, fresh)
	got := readTree(t, committed)
	for name, w := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(g, w) {
			t.Errorf("%s/%s is not what the sources declare: run make -C web types", committed, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s is declared by no source: run make -C web types", committed, name)
		}
	}
	run("-p", "src/client/examples/tsconfig.json")
}

// TestWireTypes: the browser client's wire types (src/client/wire.js) are what package
// protocol's Go types generate, so that its declarations follow the server's.
func TestWireTypes(t *testing.T) {
	want, err := apigen.WireJS("../protocol")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("src/client/wire.js")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("src/client/wire.js is not what package protocol's types generate (%v): run make generate", err)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
