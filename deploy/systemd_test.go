package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is a systemd unit: section → key → values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: not a KEY=value line inside a section: %q", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// get returns the last value of a key ("" when unset).
func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// systemdSeconds parses the time spans used here: "25s", "10min", "90".
func systemdSeconds(t *testing.T, s string) time.Duration {
	t.Helper()
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second
	}
	if v, ok := strings.CutSuffix(s, "min"); ok {
		s = v + "m"
	}
	return parseDuration(t, "time span", s)
}

// envFile parses an EnvironmentFile: NAME=value lines, # comments.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not NAME=value: %q", path, line)
		}
		env[k] = v
	}
	return env
}

var hardening = map[string]string{
	"NoNewPrivileges": "yes",
	"ProtectSystem":   "strict",
	"ProtectHome":     "yes",
	"PrivateTmp":      "yes",
	"PrivateDevices":  "yes",
}

func checkHardening(t *testing.T, name string, u unitFile) {
	t.Helper()
	for k, want := range hardening {
		if got := u.get("Service", k); got != want {
			t.Errorf("%s: %s=%q, want %q", name, k, got, want)
		}
	}
	if u.get("Service", "DynamicUser") != "yes" {
		if user := u.get("Service", "User"); user == "" || user == "root" || user == "0" {
			t.Errorf("%s: runs as root (want DynamicUser=yes or a dedicated User=)", name)
		}
	}
	if u.get("Service", "EnvironmentFile") != "/etc/ballet-gateway/env" {
		t.Errorf("%s: EnvironmentFile=%q, want /etc/ballet-gateway/env", name, u.get("Service", "EnvironmentFile"))
	}
}

func TestSystemdUnits(t *testing.T) {
	env := envFile(t, filepath.Join("systemd", "env.example"))
	vars := documentedVars(t)
	for k := range env {
		if !vars[k] {
			t.Errorf("env.example sets %s, which docs/configuration.md does not document", k)
		}
	}
	for _, k := range requiredByServe {
		if env[k] == "" {
			t.Errorf("env.example does not set %s, which serve requires", k)
		}
	}
	checkSampleProvider(t, "env.example", env["BALLET_PLANNER_PROVIDER"])
	drain := 10 * time.Second // the default
	if v := env["BALLET_DRAIN_WINDOW"]; v != "" {
		drain = parseDuration(t, "BALLET_DRAIN_WINDOW", v)
	}

	u := parseUnit(t, filepath.Join("systemd", "ballet-gateway.service"))
	for k, want := range map[string]string{
		"ExecStart":  "/usr/local/bin/ballet-gateway serve",
		"Restart":    "on-failure",
		"KillSignal": "SIGTERM",
	} {
		if got := u.get("Service", k); got != want {
			t.Errorf("ballet-gateway.service: %s=%q, want %q", k, got, want)
		}
	}
	if stop := systemdSeconds(t, u.get("Service", "TimeoutStopSec")); stop <= drain+drainMargin {
		t.Errorf("TimeoutStopSec=%v, want more than the drain window %v + %v", stop, drain, drainMargin)
	}
	if km := u.get("Service", "KillMode"); km != "" && km != "mixed" && km != "control-group" {
		t.Errorf("KillMode=%s", km)
	}
	if u.get("Install", "WantedBy") == "" {
		t.Error("ballet-gateway.service has no WantedBy")
	}
	checkHardening(t, "ballet-gateway.service", u)

	m := parseUnit(t, filepath.Join("systemd", "ballet-gateway-migrate.service"))
	if m.get("Service", "Type") != "oneshot" || m.get("Service", "ExecStart") != "/usr/local/bin/ballet-gateway migrate" {
		t.Errorf("ballet-gateway-migrate.service: want a oneshot running `ballet-gateway migrate`")
	}
	checkHardening(t, "ballet-gateway-migrate.service", m)
}

// TestSystemdAnalyzeVerify runs systemd's own checker on both units. verify
// requires ExecStart to name an executable file, so the copies it checks run
// this test binary instead of /usr/local/bin/ballet-gateway.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa := requireTool(t, "systemd-analyze", "install Debian's systemd package")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"ballet-gateway.service", "ballet-gateway-migrate.service"} {
		text := strings.ReplaceAll(readFile(t, filepath.Join("systemd", name)), "/usr/local/bin/ballet-gateway", exe)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, "./"+name)
	}
	if out := run(t, dir, sa, append([]string{"verify"}, units...)...); strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
}
