package tcprelay

import "syscall"

// quickAck asks the kernel to acknowledge the next segments at once.
// Errors are ignored: the relay still works, only slower.
func quickAck(raw syscall.RawConn) {
	raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
