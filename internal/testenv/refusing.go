//go:build unix

package testenv

import (
	"net"
	"syscall"
	"testing"
)

// RefusingAddr returns a loopback address ("127.0.0.1:port") whose
// connections are refused for as long as t runs. The port is held by a
// socket that is bound and never listens, so the kernel answers every
// connection with a reset and no other listener in the test binary can
// take the port: closing a listener and reusing its port races with tests
// running in parallel, which may be handed the same port.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
}
