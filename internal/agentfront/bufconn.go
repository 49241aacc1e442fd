package agentfront

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// An agent's connection is idle almost all the time, and net/http hands a
// hijacked connection over with a 4 KiB bufio.Reader and a 4 KiB
// bufio.Writer that coder/websocket keeps for the connection's life: at
// 10,000 agents, 80 MiB of buffers that are empty nearly always.
// [smallBuffers] hands the WebSocket 16-byte ones instead, over a
// connection that reads into a pooled buffer only while bytes are arriving
// ([lazyConn]) and a writer that keeps each frame one write ([frameWriter]),
// so an idle agent holds no buffer and a message costs the system calls it
// did with 4 KiB buffers.

// smallBuffers returns w, whose Hijack gives the connection small buffers
// when the connection can be waited on without a buffer ([rawConn]: TCP
// and Unix sockets on Unix); other connections keep net/http's buffers.
// The hijacked connection goes to *got, if got is not nil: the transport
// sets deadlines on it.
func smallBuffers(w http.ResponseWriter, got *net.Conn) http.ResponseWriter {
	return hijacker{w, got}
}

// hijacker is an http.ResponseWriter whose Hijack gives small buffers.
type hijacker struct {
	http.ResponseWriter
	got *net.Conn
}

func (h hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// Hijack hijacks the connection; net/http's buffers are dropped once what
// it read past the request (an agent may send before the 101 arrives) is
// copied. Its writer is empty: Hijack has sent the 101.
func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return conn, brw, err
	}
	if h.got != nil {
		*h.got = conn
	}
	raw := rawConn(conn)
	if raw == nil || brw.Writer.Buffered() > 0 {
		return conn, brw, nil
	}
	lc := &lazyConn{Conn: conn, raw: raw}
	lc.readFD = lc.readInto // once: a method value allocates
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		lc.early = bytes.Clone(b)
	}
	fw := newFrameWriter(conn)
	return lc, bufio.NewReadWriter(bufio.NewReaderSize(lc, 16), bufio.NewWriterSize(fw, 16)), nil
}

// readBufSize is the size of the pooled buffers a connection reads into, as
// net/http's.
const readBufSize = 4 << 10

var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// lazyConn is a connection whose Read reads from the network into a pooled
// buffer, and gives the buffer back once all of it is read: while nothing
// arrives, it holds none. Reads are not concurrent (coder/websocket has one
// reader); the other methods are the connection's.
type lazyConn struct {
	net.Conn
	early  []byte // what net/http read past the handshake, read first
	raw    syscall.RawConn
	readFD func(fd uintptr) bool // readInto
	rerr   error                 // what readInto met
	buf    *[readBufSize]byte    // nil while idle
	r, w   int                   // buf[r:w] is unread
}

// Read reads into p from what arrived: p's size does not matter for the
// number of system calls (bufio's 16 bytes read as much as 4 KiB did).
func (c *lazyConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		return n, nil
	}
	if c.buf == nil {
		if len(p) >= readBufSize {
			return c.Conn.Read(p) // a large payload goes straight to its place
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	if c.r == c.w {
		readBufs.Put(c.buf)
		c.buf, c.r, c.w = nil, 0, 0
	}
	return n, nil
}

// maxHeld is the most a frameWriter holds of a frame it has not all of:
// coder/websocket's 16-byte bufio.Writer hands over at most 16 bytes of a
// frame before the rest, and a frame header is at most 14.
const maxHeld = 32

// frameWriter writes the WebSocket frames a small bufio.Writer gives it, a
// frame at a time: the first bytes of a frame (its header and a little
// payload, flushed because the buffer was full) are held until the rest
// arrives, and go out with it in one writev. A frame longer than what it
// can hold goes out as it comes. Write is called by one writer at a time
// (coder/websocket writes under its lock).
type frameWriter struct {
	// write writes a then b, in one system call where it can.
	write func(a, b []byte) error
	held  [maxHeld]byte
	n     int   // held[:n] is the start of a frame, from its first byte
	skip  int64 // bytes still to come of a frame whose start is written
}

// newFrameWriter returns a frameWriter to conn, which writes held bytes
// and the rest of their frame with one writev.
func newFrameWriter(conn net.Conn) *frameWriter {
	var bufs net.Buffers
	return &frameWriter{write: func(a, b []byte) error {
		if len(a) == 0 {
			_, err := conn.Write(b)
			return err
		}
		bufs = append(bufs[:0], a, b)
		_, err := bufs.WriteTo(conn)
		return err
	}}
}

// Write writes the whole frames in what it holds and p, and holds the
// start of the frame p ends in. It reports all of p written unless the
// connection fails.
func (w *frameWriter) Write(p []byte) (int, error) {
	total := int64(w.n) + int64(len(p))
	pos := min(w.skip, total) // w.n is 0 while skipping
	w.skip -= pos
	cut := pos
	for pos < total {
		h, k := w.peek(pos, p)
		size, ok := frameSize(h[:k])
		if !ok || size > total-pos {
			break
		}
		pos += size
		cut = pos
	}
	if tail := total - cut; tail > maxHeld {
		// Too long to hold, so the header is all here.
		h, k := w.peek(cut, p)
		size, _ := frameSize(h[:k])
		w.skip = size - tail
		cut = total
	}
	if cut == 0 { // held is a frame's start, so nothing else can end before p does
		w.n += copy(w.held[w.n:], p)
		return len(p), nil
	}
	// held is short of a whole frame, so cut is past it.
	out := p[:cut-int64(w.n)]
	err := w.write(w.held[:w.n], out)
	w.n = copy(w.held[:], p[len(out):])
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// peek returns in h[:k] up to 14 bytes (a frame header's most) of held and
// p from position pos of the two.
func (w *frameWriter) peek(pos int64, p []byte) (h [14]byte, k int) {
	if pos < int64(w.n) {
		k = copy(h[:], w.held[pos:w.n])
		pos = 0
	} else {
		pos -= int64(w.n)
	}
	k += copy(h[k:], p[pos:])
	return h, k
}

// frameSize returns the length of the WebSocket frame whose header starts
// h (RFC 6455, section 5.2), or false if h is too short to tell.
func frameSize(h []byte) (int64, bool) {
	if len(h) < 2 {
		return 0, false
	}
	size, n := int64(h[1]&0x7f), int64(2)
	switch size {
	case 126:
		if len(h) < 4 {
			return 0, false
		}
		size, n = int64(binary.BigEndian.Uint16(h[2:])), 4
	case 127:
		if len(h) < 10 {
			return 0, false
		}
		size, n = int64(binary.BigEndian.Uint64(h[2:])), 10
	}
	if h[1]&0x80 != 0 {
		n += 4 // masking key
	}
	return n + size, true
}
