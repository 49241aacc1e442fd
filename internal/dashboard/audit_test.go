package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

type auditEntry struct {
	ID     int64           `json:"id"`
	Actor  string          `json:"actor"`
	Addr   string          `json:"addr"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

type auditPage struct {
	Entries    []auditEntry `json:"entries"`
	NextBefore int64        `json:"nextBefore"`
}

// only returns the one audit entry of an action, failing unless there is
// exactly one.
func only(t *testing.T, c *client, project, action string) auditEntry {
	t.Helper()
	var page auditPage
	c.mustCall(http.StatusOK, "GET", "/api/projects/"+project+"/audit?action="+action, nil, &page)
	if len(page.Entries) != 1 {
		t.Fatalf("audit entries for %s = %+v; want exactly one", action, page.Entries)
	}
	return page.Entries[0]
}

// compact is a JSON value without spacing.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	json.Compact(&b, v)
	return b.String()
}

// sameJSON compares JSON values without regard to spacing or key order.
func sameJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, got, err)
	}
	json.Unmarshal([]byte(want), &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s; want %s", what, gb, wb)
	}
}

// TestAuditEachChange makes each kind of change once and checks its one
// entry: who, from where, what, before and after, and never a secret.
func TestAuditEachChange(t *testing.T) {
	e := newEnv(t)
	rep := e.connect("r-1", "host-a", tool("search", "Search orders.", true))
	admin := e.admin()

	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/search", map[string]any{"disabled": true, "cacheSeconds": 30}, nil)
	a := only(t, admin, "shop", "tool.update")
	if a.Actor != "ada@example.com" || a.Addr != "127.0.0.1" || a.Target != "search" {
		t.Errorf("tool.update entry = %+v; want ada from 127.0.0.1 on search", a)
	}
	sameJSON(t, "tool.update before", a.Before, `{"description":"","cacheSeconds":0,"access":"follow","disabled":false}`)
	sameJSON(t, "tool.update after", a.After, `{"description":"","cacheSeconds":30,"access":"follow","disabled":true}`)

	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"rateLimitPerMinute": 60}, nil)
	s := only(t, admin, "shop", "settings.update")
	var before, after map[string]any
	json.Unmarshal(s.Before, &before)
	json.Unmarshal(s.After, &after)
	if before["rateLimitPerMinute"] != 0.0 || after["rateLimitPerMinute"] != 60.0 {
		t.Errorf("settings.update = %s → %s; want rateLimitPerMinute 0 → 60", s.Before, s.After)
	}

	var key struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/projects/shop/keys", map[string]any{"kind": "client", "name": "laptop", "readOnly": true}, &key)
	k := only(t, admin, "shop", "key.create")
	if k.Target != key.Key.ID || string(k.Before) != "null" || !strings.Contains(compact(k.After), `"readOnly":true`) {
		t.Errorf("key.create = %+v", k)
	}
	admin.mustCall(http.StatusOK, "POST", "/api/projects/shop/keys/"+key.Key.ID+"/revoke", nil, nil)
	kr := only(t, admin, "shop", "key.revoke")
	if !strings.Contains(compact(kr.Before), `"revoked":false`) || !strings.Contains(compact(kr.After), `"revoked":true`) {
		t.Errorf("key.revoke = %s → %s; want revoked false → true", kr.Before, kr.After)
	}

	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/agent-keys/"+e.agentKey.ID, map[string]any{"author": "Shop team", "community": true}, nil)
	ak := only(t, admin, "shop", "agent_key.update")
	sameJSON(t, "agent_key.update before", ak.Before, `{"displayName":"","author":"","community":false}`)
	sameJSON(t, "agent_key.update after", ak.After, `{"displayName":"","author":"Shop team","community":true}`)

	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/replicas/"+rep.ID, map[string]any{"disabled": true}, nil)
	r := only(t, admin, "shop", "replica.update")
	sameJSON(t, "replica.update before", r.Before, `{"agentKey":"`+e.agentKey.ID+`","disabled":false}`)
	sameJSON(t, "replica.update after", r.After, `{"agentKey":"`+e.agentKey.ID+`","disabled":true}`)

	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"approveToolChanges": true}, nil)
	e.connect("r-2", "host-b", tool("refund", "Refund an order.", false))
	admin.mustCall(http.StatusOK, "POST", "/api/projects/shop/tools/refund/approve", map[string]any{}, nil)
	if ap := only(t, admin, "shop", "tool.approve"); ap.Target != "refund" || !strings.Contains(string(ap.After), "definitionHash") {
		t.Errorf("tool.approve = %+v", ap)
	}

	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	inv := only(t, admin, "shop", "member.invite")
	sameJSON(t, "member.invite after", inv.After, `{"email":"vic@example.com","role":"viewer"}`)
	// The admin who ran setup joined as the owner of shop; then vic.
	var joins auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=member.join", nil, &joins)
	if len(joins.Entries) != 2 || joins.Entries[0].Actor != "vic@example.com" || joins.Entries[1].Actor != "ada@example.com" {
		t.Fatalf("member.join entries = %+v; want vic's, then ada's at setup", joins.Entries)
	}
	sameJSON(t, "member.join at setup", joins.Entries[1].After, `{"email":"ada@example.com","role":"owner"}`)
	var ms []struct {
		UserID int64  `json:"userId"`
		Email  string `json:"email"`
	}
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/members", nil, &ms)
	var vic int64
	for _, m := range ms {
		if m.Email == "vic@example.com" {
			vic = m.UserID
		}
	}
	admin.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/members/"+itoa(vic), map[string]any{"role": "editor"}, nil)
	mu := only(t, admin, "shop", "member.update")
	sameJSON(t, "member.update before", mu.Before, `{"email":"vic@example.com","role":"viewer"}`)
	sameJSON(t, "member.update after", mu.After, `{"email":"vic@example.com","role":"editor"}`)
	admin.mustCall(http.StatusNoContent, "DELETE", "/api/projects/shop/members/"+itoa(vic), nil, nil)
	if rm := only(t, admin, "shop", "member.remove"); string(rm.After) != "null" || rm.Target != "vic@example.com" {
		t.Errorf("member.remove = %+v", rm)
	}
	_ = viewer

	var tok struct {
		Token struct {
			ID string `json:"id"`
		} `json:"token"`
		Secret string `json:"secret"`
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/projects/shop/tokens", map[string]any{"name": "deploy", "role": "editor"}, &tok)
	tc := only(t, admin, "shop", "token.create")
	sameJSON(t, "token.create after", tc.After, `{"id":"`+tok.Token.ID+`","name":"deploy","role":"editor"}`)
	// The token acts, and is named as the actor.
	bot := e.client()
	bot.bearer = tok.Secret
	bot.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/search", map[string]any{"disabled": false}, nil)
	var page auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=tool.update&limit=1", nil, &page)
	if len(page.Entries) != 1 || page.Entries[0].Actor != "token "+tok.Token.ID+" (deploy)" || page.NextBefore == 0 {
		t.Errorf("newest tool.update page = %+v; want the token as actor and a next page", page)
	}
	admin.mustCall(http.StatusOK, "POST", "/api/projects/shop/tokens/"+tok.Token.ID+"/revoke", nil, nil)
	only(t, admin, "shop", "token.revoke")

	// Filters, pages and the page.
	var mine auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?actor=ada@example.com&action=member.", nil, &mine)
	if len(mine.Entries) != 4 {
		t.Errorf("ada's member.* entries = %d; want join (at setup), invite, update, remove", len(mine.Entries))
	}
	var full auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit", nil, &full)
	for _, en := range full.Entries {
		for _, secret := range []string{key.Secret, tok.Secret} {
			if strings.Contains(string(en.Before)+string(en.After)+en.Target, secret) {
				t.Errorf("audit entry %s holds a secret", en.Action)
			}
		}
	}
	for i := 1; i < len(full.Entries); i++ {
		if full.Entries[i].ID >= full.Entries[i-1].ID {
			t.Fatal("audit entries are not newest first")
		}
	}
	html := admin.get("/p/shop/audit?action=member.update").text()
	if !strings.Contains(html, "member.update") || !strings.Contains(html, "vic@example.com") || strings.Contains(html, `data-audit="tool.update"`) {
		t.Error("the Audit page filtered to member.update does not show just that entry")
	}
	res := admin.call("GET", "/api/projects/shop/audit?limit=9999", nil, nil)
	if res.StatusCode != http.StatusBadRequest || res.apiError() != `limit: want 1 to 500, not "9999"` {
		t.Errorf("limit=9999: %d %q", res.StatusCode, res.apiError())
	}
}
