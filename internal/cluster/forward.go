package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
)

// Forwarding between gateways: a gateway that receives a request of an MCP
// session another gateway owns sends it there over HTTP, with the client's
// own headers (its Authorization among them). The owner serves a forwarded
// request where it is instead of forwarding it again, so it must know the
// request came from a peer and not from a client posing as one: the sender
// signs each forward with a MAC keyed from the secret key file every gateway
// of a cluster shares, and the owner refuses a forward that does not verify.
//
// The MAC covers the method, the path and query, the Host, the time, the
// sending gateway's id, the session id, a hash of the Authorization header
// and the body: its SHA-256 when it is at most [forwardBodyBound] bytes
// (every MCP request but those with the largest arguments), else its
// declared length, so that a large body is never held in memory twice. A
// response (an SSE stream, say) is not signed: it goes back on the
// connection the sender opened to the address its peer announced.
//
// The address a forward goes to is learned from the bus, in the owner's
// heartbeat: the owner signs it too ([ForwardAuth.SignAddr]), so that a
// party that can publish on the bus but has no key file cannot have
// clients' requests, and their credentials, forwarded to an address of
// its own.
//
// A signature holds for [ForwardWindow] either side of the receiver's
// clock; there is no memory of signatures seen, so a forward captured on
// the wire can be replayed within that window. Peer traffic carries
// clients' credentials and must stay on a private network or TLS
// (docs/deployment.md) whatever this MAC does.

// Headers of a forwarded request.
const (
	// ForwardedByHeader names the gateway that forwarded the request.
	ForwardedByHeader = "X-Spacefix-Forwarded-By"
	// ForwardAuthHeader is "v1.<unix seconds>.<MAC, base64url>".
	ForwardAuthHeader = "X-Spacefix-Forward-Auth"
)

// ForwardWindow is how far a forward's time may be from the receiver's
// clock: time for the request to cross, and for gateways' clocks to
// differ a little.
const ForwardWindow = 30 * time.Second

// forwardBodyBound is the largest body the MAC covers byte for byte.
const forwardBodyBound = 1 << 20

// forwardLabel derives the MAC key from the secret key file's keys: a key
// for this purpose only, which says nothing of the sealing ones.
const forwardLabel = "spacefix gateway forward v1"

// Why a forward is refused. Their words name no header value.
var (
	ErrForwardUnsigned = errors.New("it carries no forwarding signature")
	ErrForwardStale    = errors.New("its signature is more than 30s away from this gateway's clock (a replay, or clocks out of sync)")
	ErrForwardBadMAC   = errors.New("its signature does not verify with this gateway's secret key file (a client posing as a gateway, or a gateway with another key file)")
)

// ForwardAuth signs and verifies forwards between the gateways of one
// key file. It is safe for concurrent use.
type ForwardAuth struct {
	keys [][]byte // the first signs; each verifies
	now  func() time.Time
}

// NewForwardAuth returns the forward signer of the gateways whose secret
// key file is box's; now is the clock (nil: time.Now). After a key
// rotation the file's first key signs and every key verifies, so gateways
// part way through a rolling restart still accept each other.
func NewForwardAuth(box *secrets.Box, now func() time.Time) *ForwardAuth {
	if now == nil {
		now = time.Now
	}
	return &ForwardAuth{keys: box.Derive(forwardLabel), now: now}
}

// IsForwarded reports whether h carries a forwarding header: a request a
// gateway must verify before it serves it as a peer's.
func IsForwarded(h http.Header) bool {
	return h.Get(ForwardedByHeader) != "" || h.Get(ForwardAuthHeader) != ""
}

// StripForwarding deletes the forwarding headers from h.
func StripForwarding(h http.Header) {
	h.Del(ForwardedByHeader)
	h.Del(ForwardAuthHeader)
}

// Sign marks r, a request about to be sent to another gateway, as
// forwarded by gateway from. It may read up to [forwardBodyBound] bytes of
// r.Body, which it puts back.
func (a *ForwardAuth) Sign(r *http.Request, from string) {
	StripForwarding(r.Header)
	r.Header.Set(ForwardedByHeader, from)
	ts := strconv.FormatInt(a.now().Unix(), 10)
	mac := forwardMAC(a.keys[0], r, from, ts, bodyDigest(r))
	r.Header.Set(ForwardAuthHeader, "v1."+ts+"."+base64.RawURLEncoding.EncodeToString(mac))
}

// Verify checks that r was forwarded by a gateway holding one of the key
// file's keys, within [ForwardWindow], and removes the forwarding headers
// so that what serves r never sees them. The error says why not, in words
// fit for the log. It may read up to [forwardBodyBound] bytes of r.Body,
// which it puts back.
func (a *ForwardAuth) Verify(r *http.Request) error {
	from := r.Header.Get(ForwardedByHeader)
	auth := r.Header.Get(ForwardAuthHeader)
	StripForwarding(r.Header)
	parts := strings.Split(auth, ".")
	if from == "" || len(parts) != 3 || parts[0] != "v1" {
		return ErrForwardUnsigned
	}
	sent, err := strconv.ParseInt(parts[1], 10, 64)
	got, merr := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || merr != nil {
		return ErrForwardBadMAC
	}
	if d := a.now().Sub(time.Unix(sent, 0)); d > ForwardWindow || d < -ForwardWindow {
		return ErrForwardStale
	}
	digest := bodyDigest(r)
	for _, k := range a.keys {
		if hmac.Equal(got, forwardMAC(k, r, from, parts[1], digest)) {
			return nil
		}
	}
	return ErrForwardBadMAC
}

// forwardMAC is HMAC-SHA256 under key of what a forward binds, one field
// a line (no field holds a newline: net/http refuses them in headers and
// the request line).
func forwardMAC(key []byte, r *http.Request, from, ts, body string) []byte {
	m := hmac.New(sha256.New, key)
	auth := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	for _, f := range []string{
		forwardLabel, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, ts, from,
		r.Header.Get("Mcp-Session-Id"), hex.EncodeToString(auth[:]), body,
	} {
		io.WriteString(m, f)
		io.WriteString(m, "\n")
	}
	return m.Sum(nil)
}

// addrLabel starts what an address's MAC covers: a MAC of a forward never
// passes for one of an address, though both use the same key.
const addrLabel = "spacefix gateway address v1"

// SignAddr returns the MAC, base64url, of gateway gw's advertised address
// addr, for its heartbeats.
func (a *ForwardAuth) SignAddr(gw, addr string) string {
	return base64.RawURLEncoding.EncodeToString(addrMAC(a.keys[0], gw, addr))
}

// VerifyAddr reports whether mac, from a heartbeat, is gateway gw's
// address addr signed with one of the key file's keys.
func (a *ForwardAuth) VerifyAddr(gw, addr, mac string) bool {
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || mac == "" {
		return false
	}
	for _, k := range a.keys {
		if hmac.Equal(got, addrMAC(k, gw, addr)) {
			return true
		}
	}
	return false
}

func addrMAC(key []byte, gw, addr string) []byte {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, addrLabel+"\n"+gw+"\n"+addr+"\n")
	return m.Sum(nil)
}

// bodyDigest reads up to forwardBodyBound+1 bytes of r.Body and puts them
// back: "sha256:<hex>" of the whole body when it fits, else "length:" and
// the declared length (net/http holds a body to it).
func bodyDigest(r *http.Request) string {
	if r.Body == nil || r.Body == http.NoBody {
		sum := sha256.Sum256(nil)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, forwardBodyBound+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), errReader{err}, r.Body), r.Body}
	if err != nil || len(buf) > forwardBodyBound {
		return "length:" + strconv.FormatInt(r.ContentLength, 10)
	}
	sum := sha256.Sum256(buf)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// errReader returns err, or io.EOF when err is nil: a read error met while
// peeking at a body reaches whoever reads the rest of it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
