package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// Backoff between connection attempts: the first retry after about
// backoffMin, doubling up to backoffMax, each delay with ±20 % jitter; back
// to backoffMin after a connection was welcomed.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 30 * time.Second
)

// drainTimeout bounds each of the two waits of a stopping agent: for running
// calls to finish (their contexts still live), then for handlers to return
// after their contexts were cancelled. A variable for tests.
var drainTimeout = 10 * time.Second

// openTimeout bounds each step of opening a connection: the registration,
// the handshake and the wait for welcome.
const openTimeout = 30 * time.Second

// Run connects to the gateway and serves calls until ctx ends; then it
// closes the connection, cancels the contexts of running handlers, waits
// for them to return (up to 10 s; a handler that ignores its context is
// logged and left behind) and returns nil.
//
// It registers everything added so far (after which nothing more can be
// added), opens the WebSocket, and serves each call in its own goroutine.
// When the connection fails or drops, running handlers are cancelled and
// Run registers and connects again, forever, with backoff; each failure is
// logged through [Options.Logger], with the gateway's reason when it
// refused the registration. Run returns an error only when misused: it may
// be called once per Agent.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("core: run: Run was already called; an Agent runs once")
	}
	a.started = true
	a.mu.Unlock()
	defer a.drain()

	attempt := 0
	for {
		welcomed, err := a.connect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if welcomed {
			attempt = 0
		}
		delay := backoff(attempt, rand.Float64)
		attempt++
		a.logFailure(err, welcomed, attempt, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// drain waits for running handlers, whose contexts have been cancelled.
func (a *Agent) drain() {
	done := make(chan struct{})
	go func() {
		a.calls.Wait()
		close(done)
	}()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.log.Error("core: handlers still running after their contexts were cancelled; Run returns without them",
			"waited", drainTimeout)
	}
}

// backoff returns the delay before retry number attempt (from 0), with
// rnd in [0, 1) choosing the jitter.
func backoff(attempt int, rnd func() float64) time.Duration {
	d := backoffMax
	if attempt < 20 {
		d = min(backoffMin<<attempt, backoffMax)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rnd()))
}

func (a *Agent) logFailure(err error, welcomed bool, attempt int, delay time.Duration) {
	level, msg := slog.LevelWarn, "core: cannot connect to the gateway; retrying"
	var refused *refusedError
	switch {
	case errors.Is(err, errGoodbye):
		level, msg = slog.LevelInfo, "core: the gateway is going away; reconnecting"
	case welcomed:
		msg = "core: lost the connection to the gateway; reconnecting"
	case errors.As(err, &refused):
		level, msg = slog.LevelError, "core: the gateway refused the agent; retrying"
	}
	a.log.Log(context.Background(), level, msg,
		"err", err, "attempt", attempt, "retry_in", delay.Round(time.Millisecond))
}

// refusedError is a 4xx answer from the gateway: its text says what to fix.
type refusedError struct {
	step   string // "register" or "connect"
	status int
	text   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.step, e.status, http.StatusText(e.status), e.text)
}

// connect opens one connection and serves it until it ends. welcomed says
// whether the gateway accepted it.
func (a *Agent) connect(ctx context.Context) (welcomed bool, err error) {
	reg, disabled := a.registration()
	ticket, err := a.register(ctx, reg)
	if err != nil {
		return false, err
	}
	conn, err := a.dial(ctx, ticket)
	if err != nil {
		return false, err
	}
	s := newSession(a, conn)
	return s.serve(ctx, disabled)
}

// register POSTs the registration and returns the ticket to connect with.
func (a *Agent) register(ctx context.Context, reg agentproto.Registration) (string, error) {
	body, err := json.Marshal(reg)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.registerURL, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.opts.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "spacefix-go/"+SDKVersion)
	resp, err := a.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("register: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", answerError("register", resp.StatusCode, data)
	}
	var t agentproto.Ticket
	if err := json.Unmarshal(data, &t); err != nil || t.Ticket == "" {
		return "", fmt.Errorf("register: the gateway answered 200 without a ticket: %.200q", data)
	}
	return t.Ticket, nil
}

// answerError describes a non-200 answer, keeping the gateway's text.
func answerError(step string, status int, body []byte) error {
	text := strings.TrimSpace(string(body))
	if status >= 400 && status < 500 {
		return &refusedError{step: step, status: status, text: text}
	}
	if text == "" {
		return fmt.Errorf("%s: %d %s", step, status, http.StatusText(status))
	}
	return fmt.Errorf("%s: %d %s: %.300s", step, status, http.StatusText(status), text)
}

// dial opens the WebSocket with the ticket.
func (a *Agent) dial(ctx context.Context, ticket string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, a.connectURL+"?ticket="+url.QueryEscape(ticket), &websocket.DialOptions{
		HTTPClient: a.client,
		HTTPHeader: http.Header{
			"Authorization": {"Bearer " + a.opts.APIKey},
			"User-Agent":    {"spacefix-go/" + SDKVersion},
		},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			return nil, answerError("connect", resp.StatusCode, body)
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	conn.SetReadLimit(agentproto.MaxFrameBytes)
	return conn, nil
}
