// Package buildinfo says which build of a command is running: the version the build stamped
// (go build -ldflags "-X main.version=v1.2.3"), or else the module version the Go toolchain
// recorded, with the commit it was built from and the Go version.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// String is the version line of command: stamped is the version the build set ("" for none).
func String(command, stamped string) string {
	info, _ := debug.ReadBuildInfo()
	return format(command, stamped, info, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
}

// Version is the build's version: stamped when set, else the module version the Go toolchain
// recorded, else "devel".
func Version(stamped string) string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(stamped, info)
}

func versionOf(stamped string, info *debug.BuildInfo) string {
	if stamped == "" && info != nil && info.Main.Version != "(devel)" {
		stamped = info.Main.Version
	}
	if stamped == "" {
		return "devel"
	}
	return stamped
}

// format is String's text from what the build recorded (info may be nil).
func format(command, stamped string, info *debug.BuildInfo, goVersion string) string {
	version := versionOf(stamped, info)
	var commit []string
	if info != nil {
		var revision, at, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if revision != "" {
			commit = append(commit, "commit "+revision)
			if at != "" {
				commit = append(commit, at)
			}
			if modified == "true" {
				commit = append(commit, "modified")
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", command, version)
	if len(commit) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(commit, ", "))
	}
	fmt.Fprintf(&b, " %s\n", goVersion)
	return b.String()
}
