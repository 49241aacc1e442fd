package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/store"
)

// An instance admin rotates the identity signing key from the Users and
// tokens page: the signer signs with the next key, the change is audited
// identity.rotate with key ids only, and nobody else may.
func TestRotateIdentityKey(t *testing.T) {
	e := newEnv(t)
	signer := identity.New(identity.Options{Store: e.st, Issuer: func() string { return "https://gw.example.test" }})
	if err := signer.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	d := dashboard.New(dashboard.Options{
		Store: e.st, Registry: e.reg, Identity: signer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test",
	})
	plain := e.srv // the env's own dashboard has no signer
	e.srv = httptest.NewServer(d)
	t.Cleanup(func() { e.srv.Close(); plain.Close() })
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)

	before := signer.KeyID()
	if page := admin.get("/admin").text(); !strings.Contains(page, `Signing now: <code data-kid>`+before+`</code>`) || !strings.Contains(page, `data-api="POST /api/identity/rotate"`) {
		t.Errorf("the admin page does not show the signing key %q and its Rotate button", before)
	}
	if res := viewer.call("POST", "/api/identity/rotate", nil, nil); res.StatusCode != http.StatusForbidden || signer.KeyID() != before {
		t.Errorf("a project viewer's rotate: status %d, key %q (was %q); want 403 and no change", res.StatusCode, signer.KeyID(), before)
	}
	var out struct{ Kid, Retired string }
	admin.mustCall(http.StatusOK, "POST", "/api/identity/rotate", nil, &out)
	after := signer.KeyID()
	if after == before || out.Kid != after || out.Retired != before {
		t.Errorf("rotate answered %+v; signer's key %q, was %q", out, after, before)
	}
	es, err := e.st.Audit(t.Context(), store.AuditFilter{ProjectID: 0, Action: "identity.rotate"})
	if err != nil || len(es) != 1 {
		t.Fatalf("audit identity.rotate: %v, %d entries; want 1", err, len(es))
	}
	if got := es[0]; got.Actor != "ada@example.com" || got.Target != after || string(got.Before) != `{"kid":"`+before+`"}` || string(got.After) != `{"kid":"`+after+`"}` {
		t.Errorf("audit entry %+v, before %s, after %s", got, got.Before, got.After)
	}
}
