package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	vcs := &debug.BuildInfo{
		Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T20:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"v1.2.3", vcs, "cmd v1.2.3 (commit 0123abcd, 2026-12-01T20:00:00Z, modified) go1.26 linux/amd64\n"},
		{"", vcs, "cmd devel (commit 0123abcd, 2026-12-01T20:00:00Z, modified) go1.26 linux/amd64\n"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "cmd v0.9.0 go1.26 linux/amd64\n"},
		{"v1.2.3", nil, "cmd v1.2.3 go1.26 linux/amd64\n"},
		{"", nil, "cmd devel go1.26 linux/amd64\n"},
	} {
		if got := format("cmd", tc.stamped, tc.info, "go1.26 linux/amd64"); got != tc.want {
			t.Errorf("format(%q, %v) = %q, want %q", tc.stamped, tc.info != nil, got, tc.want)
		}
	}
	if got := String("cmd", ""); !strings.HasPrefix(got, "cmd ") || !strings.Contains(got, " go1.") {
		t.Errorf("String = %q", got)
	}
}
