package agentfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// frameHeader returns a WebSocket frame header for a final text frame of
// size bytes, masked as a client's are when masked is set.
func frameHeader(size int, masked bool) []byte {
	h := []byte{0x81, 0}
	switch {
	case size > 65535:
		h[1] = 127
		h = binary.BigEndian.AppendUint64(h, uint64(size))
	case size > 125:
		h[1] = 126
		h = binary.BigEndian.AppendUint16(h, uint16(size))
	default:
		h[1] = byte(size)
	}
	if masked {
		h[1] |= 0x80
		h = append(h, 1, 2, 3, 4)
	}
	return h
}

// recordWrites returns a frameWriter that records each write it makes.
func recordWrites() (*frameWriter, *[][]byte) {
	var writes [][]byte
	fw := &frameWriter{write: func(a, b []byte) error {
		writes = append(writes, append(bytes.Clone(a), b...))
		return nil
	}}
	return fw, &writes
}

// Each frame written as coder/websocket writes it (header and payload into
// its 16-byte bufio.Writer, then a flush) goes out in one write, whole.
func TestAgentFrontFrameWriterWritesWholeFrames(t *testing.T) {
	sizes := []int{0, 1, 13, 14, 15, 16, 17, 30, 31, 32, 33, 100, 125, 126, 127, 4095, 4096, 65535, 65536, 200000}
	for _, masked := range []bool{false, true} {
		fw, writes := recordWrites()
		bw := bufio.NewWriterSize(fw, 16)
		var want bytes.Buffer
		for i, size := range sizes {
			payload := bytes.Repeat([]byte{byte('a' + i)}, size)
			h := frameHeader(size, masked)
			bw.WriteByte(h[0])
			bw.WriteByte(h[1])
			bw.Write(h[2:])
			bw.Write(payload)
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
			want.Write(h)
			want.Write(payload)
			if len(*writes) != i+1 {
				t.Fatalf("masked %v: after the frame of %d bytes, %d writes, want %d", masked, size, len(*writes), i+1)
			}
			if got := len((*writes)[i]); got != len(h)+size {
				t.Fatalf("masked %v: the frame of %d bytes went out as %d bytes", masked, size, got)
			}
		}
		if got := bytes.Join(*writes, nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("masked %v: the bytes written differ from the frames", masked)
		}
	}
}

// A writer that hands over a long frame in pieces, and frames that are not
// flushed, still get every byte out in order, and the frames after them
// are found.
func TestAgentFrontFrameWriterPieces(t *testing.T) {
	fw, writes := recordWrites()
	var stream bytes.Buffer
	stream.Write(frameHeader(100000, false))
	stream.Write(bytes.Repeat([]byte("x"), 100000))
	for _, size := range []int{3, 200, 0, 70000} {
		stream.Write(frameHeader(size, false))
		stream.Write(bytes.Repeat([]byte("y"), size))
	}
	b := stream.Bytes()
	for _, piece := range []int{1, 7, 1000, 5, 40000} {
		*writes = nil
		fw.n, fw.skip = 0, 0
		for rest := b; len(rest) > 0; {
			n := min(piece, len(rest))
			if _, err := fw.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if got := bytes.Join(*writes, nil); !bytes.Equal(got, b) {
			t.Errorf("pieces of %d: %d bytes written of %d", piece, len(got), len(b))
		}
		if fw.n != 0 || fw.skip != 0 {
			t.Errorf("pieces of %d: left holding %d bytes, skipping %d", piece, fw.n, fw.skip)
		}
	}
}

// recordingHijacker notes the buffers and connection Hijack gave.
type recordingHijacker struct {
	http.ResponseWriter
	conn net.Conn
	brw  *bufio.ReadWriter
}

func (h *recordingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn, h.brw = c, brw
	return c, brw, err
}

// echoConns counts the connections echo servers serve.
var echoConns atomic.Int64

// echoServer accepts WebSockets with small buffers (plain net/http's when
// small is false) and echoes every message; hijacked gets what each
// Hijack gave.
func echoServer(t testing.TB, small bool, hijacked chan<- *recordingHijacker) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if small {
			w = smallBuffers(w, nil)
		}
		rec := &recordingHijacker{ResponseWriter: w}
		ws, err := websocket.Accept(rec, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		ws.SetReadLimit(-1)
		if hijacked != nil {
			hijacked <- rec
		}
		echoConns.Add(1)
		go func() {
			defer echoConns.Add(-1)
			defer ws.CloseNow()
			for {
				typ, b, err := ws.Read(context.Background())
				if err != nil {
					return
				}
				if err := ws.Write(context.Background(), typ, b); err != nil {
					return
				}
			}
		}()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Messages of every size cross a connection with small buffers both ways.
func TestAgentFrontSmallBuffersEcho(t *testing.T) {
	hijacked := make(chan *recordingHijacker, 1)
	srv := echoServer(t, true, hijacked)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	rec := <-hijacked
	if _, ok := rec.conn.(*lazyConn); !ok {
		t.Errorf("the hijacked connection is a %T, want a *lazyConn", rec.conn)
	}
	if r, w := rec.brw.Reader.Size(), rec.brw.Writer.Size(); r != 16 || w != 16 {
		t.Errorf("buffers of %d and %d bytes, want 16 and 16", r, w)
	}
	for _, size := range []int{0, 1, 13, 14, 15, 16, 17, 125, 126, 4095, 4096, 4097, 65535, 65536, 1 << 20} {
		msg := bytes.Repeat([]byte(fmt.Sprint(size%10)), size)
		if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("a message of %d bytes came back as %d bytes, or changed", size, len(got))
		}
	}
}

// dialRaw opens a WebSocket to srv by hand, sending first with the
// handshake, and returns the connection and what came after the 101.
func dialRaw(t testing.TB, srv *httptest.Server, first []byte) (net.Conn, *bufio.Reader) {
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write(append([]byte(req), first...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 64)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", res.Status)
	}
	return conn, br
}

// What an agent sends right behind its handshake, before the 101 reaches
// it (net/http has read it already), is not lost.
func TestAgentFrontSmallBuffersEarlyFrame(t *testing.T) {
	srv := echoServer(t, true, nil)
	payload := []byte("hello")
	frame := append(frameHeader(len(payload), true), payload...)
	for i := range payload { // mask key 1 2 3 4
		frame[6+i] ^= byte(1 + i%4)
	}
	conn, br := dialRaw(t, srv, frame)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 2+len(payload))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatal(err)
	}
	if want := append([]byte{0x81, byte(len(payload))}, payload...); !bytes.Equal(got, want) {
		t.Errorf("echo %q, want %q", got, want)
	}
}

// BenchmarkAgentFrontIdleConn reports the gateway's heap per open, idle
// WebSocket (clients are bare TCP connections, which hold no heap of
// their own to speak of): net/http's buffers against small ones.
func BenchmarkAgentFrontIdleConn(b *testing.B) {
	for _, small := range []bool{false, true} {
		b.Run(map[bool]string{false: "net-http-buffers", true: "small-buffers"}[small], func(b *testing.B) {
			srv := echoServer(b, small, nil)
			const conns = 500
			var ms runtime.MemStats
			var per float64
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				open := make([]net.Conn, conns)
				for i := range open {
					open[i], _ = dialRaw(b, srv, nil)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				per = float64(int64(ms.HeapAlloc)-int64(before)) / conns
				for _, c := range open {
					c.Close()
				}
				for echoConns.Load() > 0 { // the next round starts from none
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(per, "heap-B/conn")
		})
	}
}

// BenchmarkAgentFrontEcho is a message's round trip through the gateway's
// side of a WebSocket, with net/http's buffers and with small ones.
func BenchmarkAgentFrontEcho(b *testing.B) {
	for _, size := range []int{200, 20000} {
		for _, small := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dB/small=%v", size, small), func(b *testing.B) {
				srv := echoServer(b, small, nil)
				ctx := context.Background()
				c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.CloseNow()
				c.SetReadLimit(-1)
				msg := bytes.Repeat([]byte("m"), size)
				b.ReportAllocs()
				for b.Loop() {
					if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
						b.Fatal(err)
					}
					if _, _, err := c.Read(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
