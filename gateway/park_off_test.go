//go:build !linux || nopark

package gateway_test

// readersPark: every reader keeps its goroutine in this build (wsnet/park_other.go).
const readersPark = false
