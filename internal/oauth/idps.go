package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/spacefix/spacefix/internal/store"
)

// IdPProblem is a trusted identity provider entry that cannot be kept as
// given; its text says what to change and is safe to show.
type IdPProblem string

func (p IdPProblem) Error() string { return string(p) }

// CheckIdP checks and normalises an identity provider entry before the
// CLI or the admin API stores it: URLs that can be fetched, client ids
// without blanks, a provisioning role that exists. The project is the
// caller's to resolve.
func CheckIdP(p store.IdP) (store.IdP, error) {
	p.Issuer = strings.TrimSpace(p.Issuer)
	if err := checkIdPURL("issuer", p.Issuer); err != nil {
		return p, err
	}
	p.JWKSURI = strings.TrimSpace(p.JWKSURI)
	if p.JWKSURI != "" {
		if err := checkIdPURL("jwks-uri", p.JWKSURI); err != nil {
			return p, err
		}
	}
	clients := p.AllowedClients[:0:0]
	for _, c := range p.AllowedClients {
		c = strings.TrimSpace(c)
		if c == "" || strings.ContainsAny(c, " \t\r\n") || len(c) > maxURILen {
			return p, IdPProblem(fmt.Sprintf("allowed-client %q is not a client id: want a registered client id (client_…) or a Client ID Metadata Document URL.", c))
		}
		clients = append(clients, c)
	}
	p.AllowedClients = clients
	switch {
	case p.ProvisionProjectID == 0 && p.ProvisionRole != "":
		return p, IdPProblem("provision needs both a project and a role: --provision PROJECT:ROLE (provisionProject and provisionRole in the admin API).")
	case p.ProvisionProjectID != 0 && !p.ProvisionRole.Valid():
		return p, IdPProblem(fmt.Sprintf("provision role %q is not one of viewer, editor, owner.", p.ProvisionRole))
	}
	return p, nil
}

// checkIdPURL accepts an https URL, or an http one on a loopback host
// (a test identity provider on the same machine).
func checkIdPURL(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return IdPProblem(fmt.Sprintf("%s %q must be an absolute https URL without query or fragment, e.g. https://acme.okta.com.", what, raw))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
	}
	return IdPProblem(fmt.Sprintf("%s %q must use https (http only on a loopback address, for tests).", what, raw))
}

// How the signing keys of identity providers are kept.
const (
	idpKeysTTL      = time.Hour        // a key set is fetched again after this
	idpRefetchAfter = 10 * time.Second // an unknown kid fetches again at most this often
	idpFetchTimeout = 5 * time.Second
	idpMaxBody      = 256 << 10
)

// errIdPFetch means an identity provider's metadata or keys could not be
// fetched; the reason is logged, never shown.
var errIdPFetch = errors.New("identity provider keys not fetched")

// idpKeys caches each identity provider's JSON Web Key Set. A kid not in
// the cached set fetches it again (keys rotate), at most once per
// [idpRefetchAfter], so that assertions with made-up kids cannot make the
// gateway hammer the provider.
type idpKeys struct {
	hc  *http.Client
	now func() time.Time

	mu   sync.Mutex
	sets map[string]*keySet // by issuer + " " + configured jwks_uri
}

type keySet struct {
	keys    jose.JSONWebKeySet
	fetched time.Time // zero until a fetch succeeded
	tried   time.Time // the last fetch, whether or not it succeeded
}

func newIdPKeys(hc *http.Client, now func() time.Time) *idpKeys {
	return &idpKeys{hc: hc, now: now, sets: make(map[string]*keySet)}
}

// key returns the public key with id kid (any key, when kid is empty and
// the set has one) of an identity provider. nil and no error: no such key.
func (k *idpKeys) key(ctx context.Context, p store.IdP, kid string) (*jose.JSONWebKey, error) {
	id := p.Issuer + " " + p.JWKSURI
	now := k.now()
	k.mu.Lock()
	set := k.sets[id]
	if set == nil {
		set = &keySet{}
		k.sets[id] = set
	}
	found := pick(set.keys, kid)
	stale := set.fetched.IsZero() || now.Sub(set.fetched) > idpKeysTTL
	mayFetch := now.Sub(set.tried) >= idpRefetchAfter
	if (found != nil && !stale) || !mayFetch {
		k.mu.Unlock()
		return found, nil
	}
	set.tried = now
	k.mu.Unlock()

	keys, err := k.fetch(ctx, p)
	if err != nil {
		if found != nil {
			return found, nil // keep using a known key while the provider is away
		}
		return nil, err
	}
	k.mu.Lock()
	set.keys, set.fetched = keys, now
	k.mu.Unlock()
	return pick(keys, kid), nil
}

// pick finds a public signing key by kid.
func pick(set jose.JSONWebKeySet, kid string) *jose.JSONWebKey {
	for i := range set.Keys {
		key := &set.Keys[i]
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if key.KeyID == kid || (kid == "" && len(set.Keys) == 1) {
			if !key.IsPublic() {
				return nil // a provider that publishes private keys is not one to trust
			}
			return key
		}
	}
	return nil
}

// fetch reads the provider's key set: from its jwks_uri, else from the
// jwks_uri of its metadata, whose issuer must be the provider's.
func (k *idpKeys) fetch(ctx context.Context, p store.IdP) (jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, idpFetchTimeout)
	defer cancel()
	uri := p.JWKSURI
	if uri == "" {
		var err error
		if uri, err = k.discover(ctx, p.Issuer); err != nil {
			return jose.JSONWebKeySet{}, err
		}
	}
	var set jose.JSONWebKeySet
	if err := k.getJSON(ctx, uri, &set); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	return set, nil
}

// discover finds an issuer's jwks_uri in its OpenID Connect discovery
// document, else in its RFC 8414 metadata.
func (k *idpKeys) discover(ctx context.Context, issuer string) (string, error) {
	base := strings.TrimRight(issuer, "/")
	var last error
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := k.getJSON(ctx, base+path, &meta); err != nil {
			last = err
			continue
		}
		if meta.Issuer != issuer {
			return "", fmt.Errorf("%w: the metadata of %s names issuer %q", errIdPFetch, issuer, meta.Issuer)
		}
		if err := checkIdPURL("jwks_uri", meta.JWKSURI); err != nil {
			return "", fmt.Errorf("%w: %v", errIdPFetch, err)
		}
		return meta.JWKSURI, nil
	}
	return "", last
}

func (k *idpKeys) getJSON(ctx context.Context, uri string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errIdPFetch, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errIdPFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: HTTP %d", errIdPFetch, uri, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, idpMaxBody+1))
	if err == nil && len(body) > idpMaxBody {
		err = fmt.Errorf("more than %d bytes", idpMaxBody)
	}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", errIdPFetch, uri, err)
	}
	return nil
}
