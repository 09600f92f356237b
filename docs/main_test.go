package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// need skips the test when a tool is missing locally, and fails it in CI.
func need(t *testing.T, ok bool, what, install string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (CI=true): %s", what, install)
	}
	t.Skipf("%s is missing: %s", what, install)
}

// described is what check.mjs printed: both descriptions as JSON, once they passed its checks.
type described struct {
	AsyncAPI map[string]any `json:"asyncapi"`
	OpenAPI  map[string]any `json:"openapi"`
}

var (
	checkOnce sync.Once
	checked   *described
	checkErr  string
)

// descriptions runs check.mjs once per test binary: it validates asyncapi.yaml and openapi.yaml
// and their examples, and returns both documents.
func descriptions(t *testing.T) *described {
	t.Helper()
	node, err := exec.LookPath("node")
	need(t, err == nil, "node", "install Node.js 20 or later")
	for _, p := range []string{"@asyncapi/parser", "@seriousme/openapi-schema-validator", "ajv", "ajv-formats", "yaml"} {
		_, err := os.Stat(filepath.Join("node_modules", p, "package.json"))
		need(t, err == nil, "docs/node_modules/"+p, "run npm ci --prefix docs")
	}
	checkOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hung validator's
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "check.mjs", "--json")
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			checkErr = "node check.mjs: " + err.Error() + "\n" + stderr.String()
			return
		}
		var d described
		if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
			checkErr = "node check.mjs printed no JSON: " + err.Error()
			return
		}
		checked = &d
	})
	if checked == nil {
		t.Fatal(checkErr)
	}
	return checked
}

// TestDescriptionsValid: asyncapi.yaml passes the AsyncAPI parser without a diagnostic,
// openapi.yaml the OpenAPI 3.1 schema, and every example of both matches its schema.
func TestDescriptionsValid(t *testing.T) {
	d := descriptions(t)
	if d.AsyncAPI["asyncapi"] != "3.0.0" || d.OpenAPI["openapi"] != "3.1.0" {
		t.Fatalf("versions: asyncapi %v, openapi %v", d.AsyncAPI["asyncapi"], d.OpenAPI["openapi"])
	}
}

// at follows a path of keys and indexes through decoded JSON; nil where there is nothing.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// deref follows a local $ref ("#/a/b") within doc until v is no reference.
func deref(t *testing.T, doc map[string]any, v any) any {
	t.Helper()
	for i := 0; i < 16; i++ {
		ref, ok := at(v, "$ref").(string)
		if !ok {
			return v
		}
		if len(ref) < 2 || ref[:2] != "#/" {
			t.Fatalf("a reference outside the document: %s", ref)
		}
		var path []any
		for _, p := range splitPointer(ref[2:]) {
			path = append(path, p)
		}
		if v = at(doc, path...); v == nil {
			t.Fatalf("unresolved reference %s", ref)
		}
	}
	t.Fatalf("references in a loop at %v", v)
	return nil
}

func splitPointer(p string) []string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}
