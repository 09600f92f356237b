package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// memoryLimitShare is the share of the container's memory limit the Go runtime is held to
// when GOMEMLIMIT is not set: the rest is for what the runtime does not count (the binary,
// thread stacks, the kernel's socket buffers charged to the container).
const memoryLimitShare = 0.9

// cgroupMemoryFiles are the files that may hold the memory limit of the process: its own
// cgroup's, named by /proc/self/cgroup (v2 and v1: a systemd unit's MemoryMax=, or "/" in a
// container's cgroup namespace), then a container's v2 and v1 files.
func cgroupMemoryFiles(procSelfCgroup string) []string {
	var files []string
	if b, err := os.ReadFile(procSelfCgroup); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			_, rest, _ := strings.Cut(line, ":")
			controllers, path, _ := strings.Cut(rest, ":")
			if !strings.HasPrefix(path, "/") || strings.Contains(path, "..") {
				continue
			}
			switch {
			case controllers == "":
				files = append(files, filepath.Join("/sys/fs/cgroup", path, "memory.max"))
			case slices.Contains(strings.Split(controllers, ","), "memory"):
				files = append(files, filepath.Join("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"))
			}
		}
	}
	return append(files, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
}

// applyMemoryLimit holds the Go runtime to memoryLimitShare of the container's memory limit
// unless GOMEMLIMIT is set (the runtime has applied it already) or there is no limit. It
// returns the limit set, 0 for none.
func applyMemoryLimit(getenv func(string) string, files []string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 { // "max", or v1's "no limit"
			return 0
		}
		limit := int64(float64(n) * memoryLimitShare)
		debug.SetMemoryLimit(limit)
		return limit
	}
	return 0
}
