//go:build !linux

package tcprelay

import "syscall"

// quickAck: TCP_QUICKACK is Linux's; elsewhere only Nagle is turned off.
func quickAck(syscall.RawConn) {}
