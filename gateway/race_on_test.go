//go:build race

package gateway_test

// raceBuild: the race detector's build, whose delivery of large fan-outs is several times
// slower; tests that measure timing-dependent bounds run without it (make test runs them so).
const raceBuild = true
