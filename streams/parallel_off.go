//go:build noparallel

package streams

// parallelFanout is off in this build: see parallel.go.
const parallelFanout = false
