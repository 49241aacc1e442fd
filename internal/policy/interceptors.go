package policy

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Limits on the interceptors of a policy.
const (
	MaxInterceptors           = 10
	DefaultInterceptorTimeout = 500 * time.Millisecond
	MaxInterceptorTimeout     = 30 * time.Second
)

// InterceptorError is why an interceptor entry was refused.
type InterceptorError struct {
	Index int
	Field string
	Msg   string
}

func (e *InterceptorError) Error() string {
	return fmt.Sprintf("interceptor %d: %s: %s", e.Index+1, e.Field, e.Msg)
}

// TimeoutOf is the interceptor's timeout, its default when unset.
func (ic Interceptor) TimeoutOf() time.Duration {
	d, err := time.ParseDuration(ic.Timeout)
	if err != nil || d <= 0 {
		return DefaultInterceptorTimeout
	}
	return d
}

// checkInterceptors validates the interceptor entries of a document.
func checkInterceptors(list []Interceptor) error {
	if len(list) > MaxInterceptors {
		return fmt.Errorf("the policy lists %d interceptors; at most %d are kept", len(list), MaxInterceptors)
	}
	for i, ic := range list {
		bad := func(field, format string, args ...any) error {
			return &InterceptorError{Index: i, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case ic.Agent != "":
			// The agent protocol does not carry the interceptor methods to
			// a bridged server yet: refused when saved, rather than failing
			// every call it would hook.
			return bad("agent", "interceptors on a bridged agent are not supported yet; run the interceptor server where the gateway can reach it and give its url")
		case ic.URL == "":
			return bad("url", "give the interceptor server's url (http or https)")
		}
		if ic.URL != "" {
			u, err := url.Parse(ic.URL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return bad("url", "%q is not an http(s) URL", ic.URL)
			}
			if u.User != nil {
				return bad("url", "put credentials in headers, not in the URL")
			}
		}
		if ic.Timeout != "" {
			d, err := time.ParseDuration(ic.Timeout)
			if err != nil || d <= 0 || d > MaxInterceptorTimeout {
				return bad("timeout", "%q is not a duration between 1ms and %v (e.g. \"500ms\")", ic.Timeout, MaxInterceptorTimeout)
			}
		}
		switch ic.Mode {
		case "", Enforce, Audit:
		default:
			return bad("mode", "%q is not enforce or audit", ic.Mode)
		}
		for k := range ic.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				return bad("headers", "%q is not a header name", k)
			}
		}
	}
	return nil
}
