//go:build !linux || nopark

package gateway_test

// readersPark: every reader keeps its goroutine in this build (poller/poller_other.go).
const readersPark = false
