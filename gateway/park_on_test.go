//go:build linux && !nopark

package gateway_test

// readersPark: idle readers park in this build (poller/poller_linux.go).
const readersPark = true
