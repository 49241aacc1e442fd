package bridge

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
)

// A server's tool may declare execution.taskSupport (MCP tasks), which the
// bridge registers as its own. go-sdk v1.8.0's client decodes tools/list
// into mcp.Tool, which has no such field, and its connections cannot be
// wrapped (the client asserts unexported interfaces on them), so the
// bridge reads the field off the bytes the server sends: every line of a
// stdio server's output, and the response bodies of the tools/list
// requests of a remote one. Only lines that mention "taskSupport" are
// decoded; a line longer than maxResponse is skipped.

// taskSupports are the server's tools' task support by name, as last
// listed.
type taskSupports struct {
	mu sync.Mutex
	by map[string]string
}

// option returns the tool option of tool name's task support, or nil when
// the server declared none (or a value MCP does not define).
func (s *taskSupports) option(name string) core.ToolOption {
	s.mu.Lock()
	ts := s.by[name]
	s.mu.Unlock()
	switch ts {
	case agentproto.TaskOptional, agentproto.TaskRequired:
		return core.TaskSupport(core.TaskMode(ts))
	}
	return nil
}

// note reads one JSON-RPC message (an SSE data line or a line of stdio) and
// keeps the task support of the tools of a tools/list result in it.
func (s *taskSupports) note(line []byte) {
	line = bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data:"))
	if !bytes.Contains(line, []byte(`"taskSupport"`)) {
		return
	}
	var msg struct {
		Result *struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Result == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]string{}
	}
	for _, t := range msg.Result.Tools {
		if t.Execution != nil {
			s.by[t.Name] = t.Execution.TaskSupport
		} else {
			delete(s.by, t.Name)
		}
	}
}

// lines is an io.Writer that passes each complete line of what is
// written to note.
type lines struct {
	note func([]byte)
	buf  []byte
	skip bool // the current line is over maxResponse
}

func (l *lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if !l.skip {
			if len(l.buf)+len(part) > maxResponse {
				l.skip, l.buf = true, nil
			} else {
				l.buf = append(l.buf, part...)
			}
		}
		if i < 0 {
			break
		}
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

// flush passes on the line so far, and starts the next.
func (l *lines) flush() {
	if !l.skip && len(l.buf) > 0 {
		l.note(l.buf)
	}
	l.skip = false
	if cap(l.buf) > 64<<10 {
		l.buf = nil // keep no large buffer between lists
	} else {
		l.buf = l.buf[:0]
	}
}

// tapReader passes what r reads, line by line, to s: a stdio server's
// output.
func (s *taskSupports) tapReader(r io.Reader) io.Reader {
	return io.TeeReader(r, &lines{note: s.note})
}

// listTap is an HTTP transport that passes the response bodies of
// tools/list requests, line by line, to tasks.
type listTap struct {
	tasks *taskSupports
	base  http.RoundTripper
}

func (t listTap) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return t.base.RoundTrip(r)
	}
	body, err := r.GetBody()
	if err != nil {
		return t.base.RoundTrip(r)
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(body, head)
	body.Close()
	resp, err := t.base.RoundTrip(r)
	if err != nil || !bytes.Contains(head[:n], []byte(`"tools/list"`)) {
		return resp, err
	}
	l := &lines{note: t.tasks.note}
	resp.Body = tappedBody{Reader: io.TeeReader(resp.Body, l), c: resp.Body, l: l}
	return resp, nil
}

// tappedBody flushes the last line (a JSON body ends without a newline)
// when it is closed.
type tappedBody struct {
	io.Reader
	c io.Closer
	l *lines
}

func (b tappedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.l.flush()
	}
	return n, err
}

func (b tappedBody) Close() error {
	b.l.flush()
	return b.c.Close()
}
