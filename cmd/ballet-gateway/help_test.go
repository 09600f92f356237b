package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/server"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// runBinary runs the binary with env (and childEnv's) to its end, returning its exit status,
// stdout and stderr.
func runBinary(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = childEnv(env)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

// Every command and subcommand prints its usage on stdout for --help and -h, and exits 0.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "ballet-gateway serve [--migrate]"},
		{[]string{"-h"}, "ballet-gateway admin revoke KEY SUBJECT"},
		{[]string{"help"}, "ballet-gateway version"},
		{[]string{"help", "serve"}, "usage: ballet-gateway serve [--migrate]"},
		{[]string{"serve", "--help"}, "BALLET_HEARTBEAT_INTERVAL=15s"},
		{[]string{"serve", "--migrate", "-h"}, "BALLET_OIDC_ISSUER (required)"},
		{[]string{"dev", "--help"}, "BALLET_ADDR=127.0.0.1:8080"},
		{[]string{"dev", "-h"}, "BALLET_PLANNER_PROVIDER=scripted"},
		{[]string{"migrate", "--help"}, "BALLET_DATABASE_URL (required)"},
		{[]string{"admin", "--help"}, "admin grant KEY SUBJECT ROLE"},
		{[]string{"admin", "help"}, "admin project-create KEY NAME"},
		{[]string{"admin", "grant", "--help"}, "usage: ballet-gateway admin grant KEY SUBJECT ROLE"},
		{[]string{"admin", "project-create", "-h"}, "usage: ballet-gateway admin project-create KEY NAME"},
		{[]string{"admin", "revoke", "--help"}, "usage: ballet-gateway admin revoke KEY SUBJECT"},
		{[]string{"help", "admin", "grant"}, "usage: ballet-gateway admin grant"},
		{[]string{"admin", "connections", "--help"}, "usage: ballet-gateway admin connections [SUBJECT] [--json]"},
		{[]string{"admin", "--help"}, "admin connections [SUBJECT]"},
		{[]string{"--help"}, "admin connections [SUBJECT] [--json]"},
	} {
		code, out, errOut := runBinary(t, nil, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) || errOut != "" {
			t.Errorf("%v: exit %d, stdout lacks %q or stderr is not empty:\n%s\nstderr: %s", tc.args, code, tc.want, out, errOut)
		}
	}
	// Bad usage: exit 2, the message and the command's usage on stderr, nothing on stdout.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "bogus"}, `help: unknown command "bogus"`},
		{[]string{"serve", "--bogus"}, "usage: ballet-gateway serve"},
		{[]string{"dev", "extra"}, "usage: ballet-gateway dev"},
		{[]string{"admin", "revoke", "WEB"}, "usage: ballet-gateway admin revoke KEY SUBJECT"},
		{[]string{"admin", "connections", "alice", "bob"}, "usage: ballet-gateway admin connections"},
		{[]string{"admin", "connections", "--yaml"}, "unknown flag --yaml"},
		{[]string{"version", "extra"}, "version takes no arguments"},
	} {
		code, out, errOut := runBinary(t, nil, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr lacks %q:\n%s", tc.args, code, out, tc.want, errOut)
		}
	}
}

// serve --help and dev --help list every setting of the table each reads, with its doc, and
// name the ones it ignores.
func TestHelpListsTheSettings(t *testing.T) {
	var serveOut, devOut bytes.Buffer
	help(&serveOut, "serve")
	help(&devOut, "dev")
	for _, s := range (&config{}).settings() {
		for _, h := range []struct {
			name string
			out  string
			cmds commands
		}{{"serve", serveOut.String(), forServe}, {"dev", devOut.String(), forDev}} {
			listed := strings.Contains(h.out, "\n  "+s.name+"=") || strings.Contains(h.out, "\n  "+s.name+" (")
			ignored := strings.Contains(h.out, "\n  "+s.name+"\n")
			switch {
			case s.doc == "":
				t.Errorf("%s has no doc", s.name)
			case s.cmds&h.cmds != 0 && (!listed || !strings.Contains(h.out, s.doc)):
				t.Errorf("%s --help does not list %s", h.name, s.name)
			case s.cmds&h.cmds == 0 && (listed || !ignored):
				t.Errorf("%s --help lists %s, which it ignores, or does not say it ignores it", h.name, s.name)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runBinary(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "ballet-gateway ") || !strings.Contains(out, " go1.") {
			t.Errorf("%v: exit %d: %q", args, code, out)
		}
	}
	// A version the build stamps.
	stamped := t.TempDir() + "/ballet-gateway"
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3", "-o", stamped, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(stamped, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "ballet-gateway v1.2.3") {
		t.Fatalf("stamped build: %q %v", out, err)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:8080": true, "localhost:8080": true,
		"LocalHost:1": true, "[::ffff:127.0.0.1]:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false,
		"example.com:8080": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// dev refuses an address beyond loopback unless BALLET_DEV_ALLOW_REMOTE=true, and warns of
// what it then exposes and of the settings it ignores.
func TestDevAddressAndIgnoredSettings(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		code, _, errOut := runBinary(t, []string{"BALLET_ADDR=" + addr}, "dev")
		if code != 1 || !strings.Contains(errOut, "BALLET_ADDR") || !strings.Contains(errOut, "BALLET_DEV_ALLOW_REMOTE=true") {
			t.Errorf("dev on %s: exit %d:\n%s", addr, code, errOut)
		}
	}
	p := start(t, []string{"BALLET_ADDR=0.0.0.0:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_DEV_ALLOW_REMOTE=true",
		"BALLET_DATABASE_URL=postgres://nowhere/db", "BALLET_OIDC_ISSUER=https://issuer.example",
		"BALLET_OIDC_AUDIENCE=ballet"}, "dev")
	p.waitLine(t, wsURLRe)
	out := p.output()
	for _, want := range []string{
		"dev's token mint (GET /dev/token) is open to anyone who reaches 0.0.0.0:0",
		"dev ignores BALLET_DATABASE_URL", "dev ignores BALLET_OIDC_ISSUER", "dev ignores BALLET_OIDC_AUDIENCE",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("dev's output has not one %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "BALLET_TAIL") {
		t.Errorf("dev warns of a setting that is not set:\n%s", out)
	}
	_ = p.cmd.Process.Kill()
	p.wait(t, 30*time.Second)
}

// TestHelpEveryCommand: --help and -h after every command and subcommand the CLI lists (its
// usage, and admin's) exit 0 with that command's usage on stdout.
func TestHelpEveryCommand(t *testing.T) {
	cmds := map[string]bool{"help": true, "admin": true}
	for _, args := range [][]string{{"help"}, {"admin", "--help"}} {
		code, out, _ := runBinary(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, line := range strings.Split(out, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ballet-gateway ")
			if !ok {
				continue
			}
			parts := strings.Split(rest, "|") // "admin sign-out SUBJECT | block SUBJECT"
			f := strings.Fields(parts[0])
			if f[0] != "admin" {
				cmds[f[0]] = true
				continue
			}
			cmds["admin "+f[1]] = true
			for _, p := range parts[1:] {
				cmds["admin "+strings.Fields(p)[0]] = true
			}
		}
	}
	for _, want := range []string{"serve", "dev", "migrate", "version", "admin", "admin grant", "admin block", "admin unblock", "admin connections"} {
		if !cmds[want] {
			t.Fatalf("the usage lists no %q (read %v)", want, cmds)
		}
	}
	for cmd := range cmds {
		for _, flag := range []string{"--help", "-h"} {
			args := append(strings.Fields(cmd), flag)
			code, out, errOut := runBinary(t, nil, args...)
			if code != 0 || !strings.Contains(out, "usage: ballet-gateway "+cmd) && !(cmd == "admin" && strings.Contains(out, "usage:")) || errOut != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the usage of %s", args, code, out, errOut, cmd)
			}
		}
	}
}

// serve --help shows the defaults the packages apply themselves: those the packages fill in
// beyond their Config and Options types' WithDefaults, each compared with what the package
// does or exports.
func TestHelpShowsThePackagesDefaults(t *testing.T) {
	var out bytes.Buffer
	help(&out, "serve")
	limits := tracker.NewService(nil, nil).Limits()
	for name, want := range map[string]any{
		"BALLET_TAIL_MAX_LAG":          server.DefaultTailMaxLag,
		"BALLET_ADMIN_MAX_LISTINGS":    operator.DefaultMaxListings,
		"BALLET_RECENT_EVENTS_BYTES":   streams.DefaultRecentBytes,
		"BALLET_MAX_CATCH_UPS":         streams.DefaultCatchUps,
		"BALLET_CATCH_UP_LIMIT":        streams.DefaultCatchUpLimit,
		"BALLET_CATCH_UP_BYTES":        streams.DefaultCatchUpBytes,
		"BALLET_PRESENCE_WINDOW":       presence.DefaultWindow,
		"BALLET_PRESENCE_MAX_MEMBERS":  presence.DefaultMaxMembers,
		"BALLET_MAX_TITLE_CHARS":       limits.TitleChars,
		"BALLET_MAX_DESCRIPTION_BYTES": limits.DescriptionBytes,
	} {
		if line := "\n  " + name + "=" + fmt.Sprint(want) + "\n"; !strings.Contains(out.String(), line) {
			t.Errorf("serve --help lacks %q:\n%s", line[1:], out.String())
		}
	}
}
