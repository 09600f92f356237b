package main

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults: the configuration reference (docs/configuration.md) names every variable
// the configuration reads, and its defaults are those the packages apply: an empty
// environment, once each package has filled in its options, hands every package what setting
// each documented default explicitly does.
func TestConfigDefaults(t *testing.T) {
	documented := documentedDefaults(t)
	env := map[string]string{}
	for name, v := range documented {
		if v != "" {
			env[name] = v
		}
	}
	unset, explicit := appliedConfig(t, nil), appliedConfig(t, env)
	read := map[string]bool{}
	for i, s := range unset.settings() {
		read[s.name] = true
		if _, ok := documented[s.name]; !ok {
			t.Errorf("%s is not in docs/configuration.md's table of variables", s.name)
		}
		got := reflect.ValueOf(s.field).Elem().Interface()
		want := reflect.ValueOf(explicit.settings()[i].field).Elem().Interface()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v applies when it is not set; docs/configuration.md documents %q (%v)", s.name, got, documented[s.name], want)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("docs/configuration.md documents %s, which the configuration does not read", name)
		}
	}
}

// appliedConfig loads env (serve's) with the packages' defaults filled in as they apply them.
func appliedConfig(t *testing.T, env map[string]string) *config {
	t.Helper()
	c, err := loadConfig(func(name string) string { return env[name] }, serveAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.applyDefaults()
	return c
}

var backticked = regexp.MustCompile("`([^`]+)`")

// documentedDefaults are the variables of docs/configuration.md's table, each with
// the default its row gives first in backticks ("" when the row gives none, as "empty").
func documentedDefaults(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## Variables\n")
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`BALLET_") {
			continue
		}
		def := strings.TrimSpace(cells[2])
		if m := backticked.FindStringSubmatch(def); m != nil && strings.HasPrefix(def, "`") {
			def = m[1]
		} else {
			def = ""
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = def
		}
	}
	if len(out) < 40 {
		t.Fatalf("found only %d variables in docs/configuration.md's table", len(out))
	}
	return out
}

// TestStreamCoalesce: unset and 0 leave the tailer reading at once, a duration sets its wait,
// and a negative one is refused by name.
func TestStreamCoalesce(t *testing.T) {
	checkWindow(t, "BALLET_STREAM_COALESCE", func(c *config) time.Duration { return c.tailer.Coalesce },
		map[string]time.Duration{"": 0, "0": 0, "2ms": 2 * time.Millisecond})
}

// TestPlannerOutputWindow: 0 switches batching off (a negative window for the planner), a
// duration sets it, and a negative one is refused by name.
func TestPlannerOutputWindow(t *testing.T) {
	checkWindow(t, "BALLET_PLANNER_OUTPUT_WINDOW", func(c *config) time.Duration { return c.planner.OutputWindow },
		map[string]time.Duration{"0": -1, "5ms": 5 * time.Millisecond})
}

// checkWindow checks that each value of the duration setting name gives got its want, and
// that a negative one is refused by name.
func checkWindow(t *testing.T, name string, got func(*config) time.Duration, want map[string]time.Duration) {
	t.Helper()
	only := func(v string) func(string) string {
		return func(n string) string {
			if n == name {
				return v
			}
			return ""
		}
	}
	for v, w := range want {
		c, err := loadConfig(only(v), serveAddr)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		if got(c) != w {
			t.Fatalf("%s=%q: %v, want %v", name, v, got(c), w)
		}
	}
	_, err := loadConfig(only("-1s"), serveAddr)
	var ce *configError
	if !errors.As(err, &ce) || ce.Var != name {
		t.Fatalf("%s=-1s: %v, want an error naming it", name, err)
	}
}

// TestEveryBadSettingNamed: one start of serve names every bad setting at once, the required
// ones it lacks included, and so do migrate and admin for theirs.
func TestEveryBadSettingNamed(t *testing.T) {
	env := []string{"BALLET_MAX_CONNECTIONS=abc", "BALLET_HEARTBEAT_INTERVAL=soon"}
	code, _, errOut := runBinary(t, env, "serve")
	for _, want := range []string{"BALLET_MAX_CONNECTIONS=", "BALLET_HEARTBEAT_INTERVAL=", "BALLET_DATABASE_URL",
		"BALLET_OIDC_ISSUER", "BALLET_OIDC_AUDIENCE"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("serve: exit %d, stderr lacks %s:\n%s", code, want, errOut)
		}
	}
	for _, args := range [][]string{{"migrate"}, {"admin", "block", "alice"}} {
		code, _, errOut := runBinary(t, env, args...)
		if code != 1 || !strings.Contains(errOut, "BALLET_MAX_CONNECTIONS=") || !strings.Contains(errOut, "BALLET_DATABASE_URL") {
			t.Errorf("%v: exit %d, stderr does not name both BALLET_MAX_CONNECTIONS and BALLET_DATABASE_URL:\n%s", args, code, errOut)
		}
	}
}
