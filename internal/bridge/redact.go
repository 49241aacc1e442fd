package bridge

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
)

// redactURL shows a remote server's URL as scheme://host/…: its userinfo,
// path and query are elided, since servers put tokens in all three
// (…/mcp/<secret>/sse, ?token=…). A URL with nothing after the host is
// shown whole.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "(an unreadable URL)"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return out + "/…"
	}
	return out + u.Path
}

// anyURL finds the http(s) URLs in a message: net/http's errors quote the
// URL of the request (Post "https://host/mcp/secret?token=…": …).
var anyURL = regexp.MustCompile(`https?://[^\s"'<>]+`)

// redactURLs rewrites every http(s) URL in s with [redactURL].
func redactURLs(s string) string {
	return anyURL.ReplaceAllStringFunc(s, redactURL)
}

// redactedError is err with every URL in its message redacted; errors.Is
// and errors.As still see err.
type redactedError struct{ err error }

func (e *redactedError) Error() string { return redactURLs(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr returns err with the URLs in its message redacted (nil stays
// nil): every error about a remote server goes through it before it is
// returned or logged.
func redactErr(err error) error {
	if _, done := err.(*redactedError); err == nil || done {
		return err
	}
	return &redactedError{err: err}
}

// redactingHandler redacts URLs in the records go-sdk logs about a remote
// server (its retries and failed streams quote the request's URL).
type redactingHandler struct{ slog.Handler }

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redactURLs(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactingHandler{h.Handler.WithAttrs(red)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.Handler.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redactURLs(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, redactErr(err))
		}
		return slog.String(a.Key, redactURLs(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
