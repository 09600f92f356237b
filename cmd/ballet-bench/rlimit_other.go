//go:build !unix

package main

// raiseFileLimit is a no-op where there is no RLIMIT_NOFILE; 0 means unknown.
func raiseFileLimit() (uint64, error) { return 0, nil }
