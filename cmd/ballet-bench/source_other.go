//go:build !linux

package main

import "syscall"

// bindNoPort does nothing where IP_BIND_ADDRESS_NO_PORT does not exist: bind chooses the port.
func bindNoPort(string, string, syscall.RawConn) error { return nil }
