package policy

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// agentName is an agent's name (agentproto.ValidName).
var agentName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

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
		case ic.Agent != "" && ic.URL != "":
			return bad("agent", "give the interceptor server's url or the name of the bridged agent in front of it, not both")
		case ic.Agent != "":
			// Whether the agent is a bridged one is known only once it
			// connects: a plain agent is refused at call time.
			if !agentName.MatchString(ic.Agent) {
				return bad("agent", "%q is not an agent's name (1 to 64 characters from A-Z a-z 0-9 _ -)", ic.Agent)
			}
			if len(ic.Headers) > 0 {
				return bad("headers", "headers go to a server at a url; a bridged agent's server takes none from the gateway")
			}
		case ic.URL == "":
			return bad("url", "give the interceptor server's url (http or https), or the name of a bridged agent of the project in front of it as agent")
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
