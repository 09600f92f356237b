package main

import "syscall"

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT (include/uapi/linux/in.h).
const ipBindAddressNoPort = 24

// bindNoPort defers the choice of the source port from bind to connect, where the kernel
// picks one unique for the destination rather than for the source address alone.
func bindNoPort(network, _ string, rc syscall.RawConn) error {
	if network != "tcp4" && network != "tcp" {
		return nil // IPv6 sockets take the same option at the IPv6 level; left to bind
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	}); err != nil {
		return err
	}
	return serr
}
