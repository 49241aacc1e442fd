//go:build unix

package agentfront

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawConn returns conn's file descriptor access, or nil if conn is not a
// plain socket (TLS, for one). A connection that implements syscall.Conn
// must read the bytes its descriptor reads (net's do, and so does the
// gateway's limitConn).
func rawConn(conn net.Conn) syscall.RawConn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// fill waits, holding no buffer, until the connection is readable, then
// reads what arrived into a pooled buffer.
func (c *lazyConn) fill() error {
	c.rerr = nil
	if err := c.raw.Read(c.readFD); err != nil {
		return err
	}
	return c.rerr
}

// readInto reads from fd into a pooled buffer; it returns false (wait, and
// call again) when nothing is there yet, giving the buffer back.
func (c *lazyConn) readInto(fd uintptr) bool {
	buf := readBufs.Get().(*[readBufSize]byte)
	for {
		n, err := syscall.Read(int(fd), buf[:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			readBufs.Put(buf)
			return false
		case err != nil:
			readBufs.Put(buf)
			c.rerr = os.NewSyscallError("read", err)
		case n == 0:
			readBufs.Put(buf)
			c.rerr = io.EOF
		default:
			c.buf, c.r, c.w = buf, 0, n
		}
		return true
	}
}
