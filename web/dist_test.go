package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// sourceHash computes what build.mjs records as source_hash: SHA-256 over
// "<path>\n<sha256 of the file, hex>\n" for every file under src/ and
// build.mjs, package.json and package-lock.json, sorted by path.
func sourceHash() (string, error) {
	files := []string{"build.mjs", "package.json", "package-lock.json"}
	err := filepath.WalkDir("src", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(h, "%s\n%s\n", f, hex.EncodeToString(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func TestDistIsCurrent(t *testing.T) {
	b, err := os.ReadFile("dist/build.json")
	if err != nil {
		t.Fatalf("dist/build.json: %v: run make web", err)
	}
	var rec struct {
		SourceHash string   `json:"source_hash"`
		Assets     []string `json:"assets"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("dist/build.json: %v: run make web", err)
	}
	got, err := sourceHash()
	if err != nil {
		t.Fatal(err)
	}
	if got != rec.SourceHash {
		t.Fatalf("web/dist was built from other sources (recorded %.12s, sources now %.12s): run make web", rec.SourceHash, got)
	}
	for _, a := range rec.Assets {
		if _, err := fs.Stat(dist, "dist/"+a); err != nil {
			t.Errorf("dist/build.json lists %s, which is not embedded: run make web", a)
		}
	}
}

// TestDistIsBuilt: dist/ is exactly what make web builds from the sources, byte for byte, so
// that nobody edits it by hand: the build runs afresh into a temporary directory.
func TestDistIsBuilt(t *testing.T) {
	node := nodeModules(t, "esbuild")
	fresh := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "build.mjs", fresh)
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, out)
	}
	want, got := readTree(t, fresh), readTree(t, "dist")
	for name, w := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(g, w) {
			t.Errorf("dist/%s is not what make web builds: run make web", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("dist/%s is built by nothing: run make web", name)
		}
	}
}
