package agentfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// wsTransport adapts an agent's WebSocket to a [route.Transport]: JSON text
// frames, a read limit of [agentproto.MaxFrameBytes], and a ping every
// heartbeat (see keepAlive). coder/websocket allows one reader and
// concurrent writers, which is what route.Transport asks.
type wsTransport struct {
	ws        *websocket.Conn
	log       *slog.Logger
	heartbeat time.Duration
}

var _ route.Transport = (*wsTransport)(nil)

func newWSTransport(ws *websocket.Conn, log *slog.Logger, heartbeat time.Duration) *wsTransport {
	ws.SetReadLimit(agentproto.MaxFrameBytes)
	return &wsTransport{ws: ws, log: log, heartbeat: heartbeat}
}

// Send writes one message. A write is never cut short by a context, because
// coder/websocket closes the whole connection when a write's context ends
// during the write, and one client giving up must not drop an agent. A
// write to a dead peer ends when the heartbeat closes the connection.
func (t *wsTransport) Send(_ context.Context, m *agentproto.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.ws.Write(context.Background(), websocket.MessageText, b)
}

// Recv returns the next message; a frame that is not JSON is logged and
// skipped.
func (t *wsTransport) Recv(ctx context.Context) (*agentproto.Message, error) {
	for {
		_, data, err := t.ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		m := new(agentproto.Message)
		if err := json.Unmarshal(data, m); err != nil {
			t.log.Warn("agent sent a message that is not JSON; ignored", "err", err)
			continue
		}
		return m, nil
	}
}

// Close ends the connection: with a going-away close frame carrying reason,
// or at once when reason is empty.
func (t *wsTransport) Close(reason string) {
	if reason == "" {
		t.ws.CloseNow()
		return
	}
	t.ws.Close(websocket.StatusGoingAway, reason)
}

// keepAlive pings the agent every heartbeat until ctx ends, and closes the
// connection when a pong does not come back within a heartbeat.
func (t *wsTransport) keepAlive(ctx context.Context) {
	tick := time.NewTicker(t.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, t.heartbeat)
		err := t.ws.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("agent missed a heartbeat; closing its connection", "err", err)
			}
			t.ws.CloseNow()
			return
		}
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
