//go:build !unix

package agentfront

import (
	"net"
	"syscall"
)

// rawConn returns nil: connections keep net/http's buffers here.
func rawConn(net.Conn) syscall.RawConn { return nil }

// fill is not called: rawConn is nil.
func (c *lazyConn) fill() error { panic("unreachable") }

// readInto is not called: rawConn is nil.
func (c *lazyConn) readInto(uintptr) bool { panic("unreachable") }
