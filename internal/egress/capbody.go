package egress

import "io"

// CapBody returns rc reading at most n bytes of what a server sent: a read
// past them fails with tooLarge rather than end the body there (a cut
// answer must not read as a whole one), unless the body ends exactly at
// n. It bounds what a server can make the gateway hold in memory.
func CapBody(rc io.ReadCloser, n int64, tooLarge error) io.ReadCloser {
	return &cappedBody{rc: rc, left: n, tooLarge: tooLarge}
}

type cappedBody struct {
	rc       io.ReadCloser
	left     int64
	tooLarge error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more says whether the body ends at the cap.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, b.tooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
