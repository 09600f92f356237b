package server_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImporters: only the binary and the tests' harness build a replica; a library package
// that imported the root would pull every part into itself.
func TestImporters(t *testing.T) {
	allowed := map[string]bool{"cmd/ballet-gateway": true, "gateway/gatewaytest": true}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/ballet/gateway/internal/server" && !allowed[filepath.ToSlash(dir)] {
				t.Errorf("%s imports internal/server: only the binary and the tests' harness may", dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
