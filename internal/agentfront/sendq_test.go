package agentfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// dialTransport serves a real WebSocket on 127.0.0.1 and returns the
// gateway's transport of it and the agent's end.
func dialTransport(t *testing.T) (*wsTransport, *websocket.Conn) {
	t.Helper()
	got := make(chan *wsTransport, 1)
	srv := transportServer(func(tr *wsTransport) { got <- tr })
	t.Cleanup(srv.Close)
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(agentproto.MaxFrameBytes)
	tr := <-got
	t.Cleanup(func() {
		c.CloseNow()
		tr.Close("")
		tr.wait()
	})
	return tr, c
}

// Messages reach the agent in the order each sender queued them, while
// several send at once.
func TestAgentFrontSendKeepsOrder(t *testing.T) {
	tr, c := dialTransport(t)
	const senders, each = 4, 300
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				m := &agentproto.Message{Type: agentproto.TypeCancel, ID: fmt.Sprintf("c-%d-%d", s, i)}
				if err := tr.Send(context.Background(), m); err != nil {
					t.Errorf("send %s: %v", m.ID, err)
					return
				}
			}
		})
	}
	next := make([]int, senders)
	for range senders * each {
		_, b, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var m agentproto.Message
		var s, i int
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscanf(m.ID, "c-%d-%d", &s, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[s] {
			t.Fatalf("agent read %s, want c-%d-%d next", m.ID, s, next[s])
		}
		next[s]++
	}
	wg.Wait()
}

// An agent that reads nothing holds a call only until its deadline, and a
// sender only until its context ends; closing the connection does not wait
// for the agent, and the writer ends with it.
func TestAgentFrontSendToAgentThatDoesNotRead(t *testing.T) {
	tr, _ := dialTransport(t)
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	// Fill the socket and the queue: sends of as much wait once both are
	// full.
	var full bool
	for i := 0; i < 64 && !full; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := tr.Send(ctx, &agentproto.Message{Type: agentproto.TypeCall, ID: fmt.Sprint("c-", i), Args: big})
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			full = true
		case err != nil:
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if !full {
		t.Fatal("64 MiB went into the socket and queue of an agent that reads nothing")
	}

	const wait = 300 * time.Millisecond
	start := time.Now()
	deadline := start.Add(wait)
	err := tr.Send(context.Background(), &agentproto.Message{Type: agentproto.TypeCall, ID: "c-late", Args: big, Deadline: deadline.UnixMilli()})
	if took := time.Since(start); !errors.Is(err, route.ErrSendTimeout) || took < wait-time.Millisecond || took > wait+time.Second {
		t.Errorf("a call with a %v deadline: %v after %v, want ErrSendTimeout at its deadline", wait, err, took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	sent := make(chan error, 1)
	go func() {
		sent <- tr.Send(ctx, &agentproto.Message{Type: agentproto.TypeCall, ID: "c-cancelled", Args: big})
	}()
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Errorf("a send whose context ended: %v, want context.Canceled", err)
	}

	start = time.Now()
	tr.Close("gateway shutting down")
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v, want no wait (the socket is full for good)", took)
	}
	if err := tr.Send(context.Background(), &agentproto.Message{Type: agentproto.TypeCancel, ID: "c-0"}); !errors.Is(err, errClosed) {
		t.Errorf("a send after Close: %v, want %v", err, errClosed)
	}
	ended := make(chan struct{})
	go func() { tr.wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(closeGrace + 5*time.Second):
		t.Fatalf("the writer still runs %v after Close", closeGrace+5*time.Second)
	}
}
