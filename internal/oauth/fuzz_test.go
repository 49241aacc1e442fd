package oauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/ratelimit"
)

// FuzzRegister: any registration body gets 201, 400 or 429 with an OAuth
// error body, never a panic or a 500; an accepted one names only redirect
// URIs the rules allow.
func FuzzRegister(f *testing.F) {
	for _, seed := range []string{
		`{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`,
		`{"redirect_uris":["http://127.0.0.1:3000/cb"],"grant_types":["authorization_code","refresh_token"]}`,
		`{"redirect_uris":["cursor://anysphere.cursor-retrieval/oauth/callback"],"logo_uri":"https://a.example/l.png"}`,
		`{"redirect_uris":["javascript:alert(1)"]}`, `{"redirect_uris":null}`, `[]`, `{`, ``,
	} {
		f.Add(seed)
	}
	h := newHarness(f)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", RegisterPath, strings.NewReader(body))
		req.RemoteAddr = "192.0.2.1:1234" // one address: the per-address limit is not what is fuzzed
		h.s.limits = ratelimit.New()
		h.s.register(rec, req)
		switch rec.Code {
		case http.StatusCreated, http.StatusBadRequest:
		default:
			t.Fatalf("register %q = %d %s", body, rec.Code, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), `"client_id"`) && !strings.Contains(rec.Body.String(), `"error"`) {
			t.Fatalf("register %q answered %s", body, rec.Body)
		}
	})
}

// FuzzAuthorize: any authorization query is an error page, a redirect to a
// registered URI, or a request for the consent page; never a panic, and a
// redirect never leaves the registered URI.
func FuzzAuthorize(f *testing.F) {
	h := newHarness(f)
	// Mutated client ids name metadata documents anywhere: never dial out.
	h.s.docs.http = &http.Client{Transport: noNetwork{}}
	id := h.publicClient()
	f.Add(authQuery(id).Encode())
	f.Add("response_type=code&client_id=" + id + "&redirect_uri=http://127.0.0.1:9/callback&code_challenge_method=plain")
	f.Add("client_id=" + id + "&redirect_uri=https://evil.example/cb")
	f.Add("client_id=https://127.0.0.1/x.json")
	f.Fuzz(func(t *testing.T, query string) {
		h.s.limits = ratelimit.New()
		r := httptest.NewRequest("GET", AuthorizePath, nil)
		r.URL.RawQuery = query
		a, err := h.s.ParseAuthorize(r)
		var to string
		switch e := err.(type) {
		case nil:
			to = a.Deny()
		case *RedirectError:
			to = e.URL
		case *PageError:
			return
		default:
			t.Fatalf("ParseAuthorize(%q) = %v", query, err)
		}
		u, err := url.Parse(to)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != "/callback" {
			t.Fatalf("ParseAuthorize(%q) sends the browser to %s, not the registered URI", query, to)
		}
	})
}

type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("the fuzz test does not fetch")
}
