package wire

import (
	"bytes"
	"io"
	"net/http"
	"slices"
)

// bufferedBody is a request body already read into memory.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (bufferedBody) Close() error { return nil }

// ReadBody reads the whole request body into memory once and puts a
// reader over it back in r.Body. A body read before is not read again.
func ReadBody(r *http.Request) ([]byte, error) {
	if bb, ok := r.Body.(bufferedBody); ok {
		r.Body = bufferedBody{bytes.NewReader(bb.b), bb.b}
		return bb.b, nil
	}
	body, err := readAll(r.Body, r.ContentLength)
	r.Body = bufferedBody{bytes.NewReader(body), body}
	return body, err
}

// FirstBodyBuffer is the most readAll holds for a body before its bytes
// arrive: a client may declare a Content-Length up to the body limit and
// send nothing.
const FirstBodyBuffer = 64 << 10

// readAll reads rd to its end, as io.ReadAll does (reaching the end lifts
// the server's read deadline for the body), into a buffer that grows as
// bytes arrive. declared, the Content-Length (-1 when unknown), only caps
// how far the buffer grows ahead of what was read, so an honest body ends
// in a buffer of its own size and a dishonest one costs what it sent.
func readAll(rd io.Reader, declared int64) ([]byte, error) {
	size := 512
	if declared > 0 {
		size = int(min(declared, FirstBodyBuffer))
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			if int64(len(b)) == declared {
				// All that was declared arrived: only the end is left
				// to read, into no new buffer.
				var one [1]byte
				n, err := rd.Read(one[:])
				if n == 0 && err == io.EOF {
					return b, nil
				}
				if n == 0 && err != nil {
					return b, err
				}
				b = append(b, one[:n]...)
				continue
			}
			next := 2 * cap(b)
			if declared > int64(len(b)) {
				next = int(min(int64(next), declared))
			}
			b = slices.Grow(b, next-len(b))
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
