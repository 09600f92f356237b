//go:build linux && !nopark

package gateway_test

// readersPark: idle readers park in this build (park_linux.go).
const readersPark = true
