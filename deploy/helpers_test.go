package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// root is the repository root, relative to this package.
const root = ".."

// requireTool returns the path of an external checker. Without it the test
// skips, except under CI (CI=true), where the checker must be installed.
func requireTool(t *testing.T, name, installHint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found on PATH (CI=true): %s", name, installHint)
		}
		t.Skipf("%s not found on PATH: %s", name, installHint)
	}
	return p
}

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlPython is a Python interpreter with PyYAML: Go's standard library has
// no YAML parser and the module allows no other dependency.
func yamlPython(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if exec.Command(p, "-c", "import yaml").Run() == nil {
			return p
		}
	}
	const hint = "install Debian's python3-yaml"
	if os.Getenv("CI") == "true" {
		t.Fatalf("no python3 with PyYAML (CI=true): %s", hint)
	}
	t.Skipf("no python3 with PyYAML: %s", hint)
	return ""
}

const yamlToJSON = `
import json, sys, yaml
out = []
for p in sys.argv[1:]:
    with open(p) as f:
        out.append([d for d in yaml.safe_load_all(f) if d is not None])
json.dump(out, sys.stdout)
`

// loadYAML parses each file's YAML documents (through PyYAML's safe loader)
// into generic Go values.
func loadYAML(t *testing.T, paths ...string) [][]any {
	t.Helper()
	py := yamlPython(t)
	out := run(t, ".", py, append([]string{"-c", yamlToJSON}, paths...)...)
	var docs [][]any
	if err := json.Unmarshal([]byte(out), &docs); err != nil {
		t.Fatalf("decode the YAML of %v: %v", paths, err)
	}
	return docs
}

// loadYAMLString parses YAML text the same way.
func loadYAMLString(t *testing.T, text string) []any {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return loadYAML(t, f)[0]
}

// get walks a decoded YAML/JSON value by map keys and slice indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func num(v any, path ...any) (float64, bool) {
	f, ok := get(v, path...).(float64)
	return f, ok
}

func list(v any, path ...any) []any {
	s, _ := get(v, path...).([]any)
	return s
}

func dict(v any, path ...any) map[string]any {
	m, _ := get(v, path...).(map[string]any)
	return m
}

var docVarRE = regexp.MustCompile("`(BALLET_[A-Z0-9_]+)`")

// documentedVars are the BALLET_* variables of docs/configuration.md's
// table of variables.
func documentedVars(t *testing.T) map[string]bool {
	t.Helper()
	doc := readFile(t, filepath.Join(root, "docs", "configuration.md"))
	_, after, ok := strings.Cut(doc, "\n## Variables\n")
	if !ok {
		t.Fatal("docs/configuration.md has no Variables section")
	}
	vars := map[string]bool{}
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range docVarRE.FindAllStringSubmatch(cells[1], -1) {
			vars[m[1]] = true
		}
	}
	if len(vars) < 15 {
		t.Fatalf("found only %d variables in docs/configuration.md's table", len(vars))
	}
	return vars
}

// checkSampleProvider fails when a sample configuration turns on a real model provider: its
// key can only be a placeholder, so every planner turn would fail and the planner's alerts
// fire. A sample leaves the planner off or uses the scripted provider.
func checkSampleProvider(t *testing.T, where, provider string) {
	t.Helper()
	if provider != "" && provider != "scripted" {
		t.Errorf("%s sets BALLET_PLANNER_PROVIDER=%s; a sample leaves the planner off (empty) or scripted", where, provider)
	}
}

// requiredByServe are the variables `serve` refuses to start without.
var requiredByServe = []string{"BALLET_DATABASE_URL", "BALLET_OIDC_ISSUER", "BALLET_OIDC_AUDIENCE"}

// drainMargin is how long the gateway waits for sessions after the drain
// window before it exits (internal/server, Run: DrainWindow + 5s).
const drainMargin = 5 * time.Second

func parseDuration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return d
}
