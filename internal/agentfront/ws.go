package agentfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// wsTransport adapts an agent's WebSocket to a [route.Transport]: JSON text
// frames and a read limit of [agentproto.MaxFrameBytes]. Messages to the
// agent wait in a bounded queue for one writer (sendq.go); coder/websocket
// allows one reader, which is what route.Transport asks. It notes when the
// agent last sent anything (a ping, a pong, a message), for the front's
// watchdog.
type wsTransport struct {
	ws   *websocket.Conn // set once accepted
	nc   net.Conn        // the connection under ws, when Hijack got it
	log  *slog.Logger
	seen atomic.Int64 // unix nanoseconds of the last frame from the agent

	out    sendQueue // what waits for the socket (sendq.go)
	writer func()    // write, as a func value made once

	// Recv's context, watched once for the connection rather than by
	// coder/websocket on every frame read (a context.AfterFunc per frame);
	// Recv has one caller at a time, which alone uses these.
	readCtx   context.Context
	stopWatch func() bool
}

var _ route.Transport = (*wsTransport)(nil)

// newWSTransport returns a transport whose heard method goes into the
// WebSocket's accept options; accepted finishes it.
func newWSTransport(log *slog.Logger) *wsTransport {
	t := &wsTransport{log: log}
	t.writer = t.write
	t.heard()
	return t
}

// accepted attaches the accepted WebSocket.
func (t *wsTransport) accepted(ws *websocket.Conn) {
	ws.SetReadLimit(agentproto.MaxFrameBytes)
	t.ws = ws
}

// heard notes a frame from the agent.
func (t *wsTransport) heard() { t.seen.Store(time.Now().UnixNano()) }

// silent returns how long the agent has sent nothing, at now.
func (t *wsTransport) silent(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, t.seen.Load()))
}

// Recv returns the next message; a frame that is not JSON is logged and
// skipped. When ctx ends, the connection is closed and Recv returns ctx's
// error.
func (t *wsTransport) Recv(ctx context.Context) (*agentproto.Message, error) {
	t.watch(ctx)
	for {
		_, r, err := t.ws.Reader(context.Background())
		var m *agentproto.Message
		if err == nil {
			m, err = t.readMessage(r)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		t.heard()
		if m != nil {
			return m, nil
		}
	}
}

// readMessage reads one message from r into a pooled buffer, taken only
// once a message has begun to arrive (an idle agent holds none). A message
// that is not JSON is logged and read as nil.
func (t *wsTransport) readMessage(r io.Reader) (*agentproto.Message, error) {
	buf := messageBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			messageBufs.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	m := new(agentproto.Message)
	if err := json.Unmarshal(buf.Bytes(), m); err != nil {
		t.log.Warn("agent sent a message that is not JSON; ignored", "err", err)
		return nil, nil
	}
	return m, nil
}

// messageBufs are the buffers messages are read into, shared by every
// connection (decoding copies what it keeps): a buffer per connection
// would be held by 10,000 idle agents, one per message is garbage.
var messageBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// watch closes the connection when ctx ends, unless it watches ctx
// already (Recv is called with the same context for every message).
func (t *wsTransport) watch(ctx context.Context) {
	if ctx == t.readCtx {
		return
	}
	if t.stopWatch != nil {
		t.stopWatch()
	}
	t.readCtx, t.stopWatch = ctx, nil
	if ctx.Done() != nil {
		t.stopWatch = context.AfterFunc(ctx, func() { t.ws.CloseNow() })
	}
}

// closeReason says in words how an agent's connection ended, for the log.
func closeReason(err error) string {
	switch {
	case err == nil:
		return "closed"
	case errors.Is(err, route.ErrGoodbye):
		return err.Error()
	case errors.Is(err, context.Canceled):
		return "gateway shutting down"
	}
	switch websocket.CloseStatus(err) {
	case -1:
	case websocket.StatusNormalClosure:
		return "the agent closed the connection"
	case websocket.StatusGoingAway:
		return "the agent is stopping"
	default:
		return fmt.Sprintf("closed by the agent with status %d", websocket.CloseStatus(err))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the connection dropped without a goodbye"
	}
	return "connection lost: " + err.Error()
}
