package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// auditJSON is one audit log entry.
type auditJSON struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Addr   string          `json:"addr,omitempty"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// auditPage is a page of the audit log, newest first; NextBefore is the
// before= of the next page, 0 on the last.
type auditPage struct {
	Entries    []auditJSON `json:"entries"`
	NextBefore int64       `json:"nextBefore,omitempty"`
}

// auditFilter reads the query: limit, before (an entry id), action (exact,
// or a prefix ending in "."), actor and since (RFC 3339).
func auditFilter(q url.Values, projectID int64) (store.AuditFilter, error) {
	f := store.AuditFilter{ProjectID: projectID, Action: q.Get("action"), Actor: q.Get("actor")}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, fieldError("before", "want an entry id, not %q", v)
		}
		f.BeforeID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxAuditPage {
			return f, fieldError("limit", "want 1 to %d, not %q", store.MaxAuditPage, v)
		}
		f.Limit = n
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, fieldError("since", "want a time such as 2026-12-01T00:00:00Z, not %q", v)
		}
		f.Since = t
	}
	return f, nil
}

// readAudit reads one page of a project's audit log (0: the instance's).
func (d *Dashboard) readAudit(r *http.Request, projectID int64) (auditPage, error) {
	f, err := auditFilter(r.URL.Query(), projectID)
	if err != nil {
		return auditPage{}, err
	}
	es, err := d.st.Audit(r.Context(), f)
	if err != nil {
		return auditPage{}, err
	}
	out := auditPage{Entries: make([]auditJSON, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, auditJSON{e.ID, e.At, e.Actor, e.Addr, e.Action, e.Target, e.Before, e.After})
	}
	if len(es) == f.PageSize() {
		out.NextBefore = es[len(es)-1].ID
	}
	return out, nil
}

// apiAudit serves a project's audit log, or on /api/audit the instance's
// (users, invites, instance tokens).
func (d *Dashboard) apiAudit(w http.ResponseWriter, r *http.Request) error {
	var projectID int64
	if r.PathValue("project") != "" {
		p, err := d.project(r)
		if err != nil {
			return err
		}
		projectID = p.ID
	}
	page, err := d.readAudit(r, projectID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// AuditActions are the kinds of change the audit log records.
var AuditActions = []string{
	"project.create", "settings.update", "policy.update",
	"tool.update", "tool.approve", "tool.reject",
	"key.create", "key.revoke", "agent_key.update", "replica.update",
	"member.add", "member.invite", "member.join", "member.update", "member.remove",
	"token.create", "token.revoke", "invite.create", "invite.revoke", "user.update", "user.remove",
	"app.connect", "app.revoke", "upstream.connect", "upstream.disconnect",
}

// auditRetention says how long entries are kept, for the page.
func (d *Dashboard) auditRetention() string {
	if d.retention <= 0 {
		return "until pruned"
	}
	if days := d.retention.Hours() / 24; days >= 1 {
		return fmt.Sprintf("for %g days", days)
	}
	return "for " + d.retention.String()
}

// auditRow is an entry as the Audit page shows it: what changed, field by
// field, with the whole values behind a disclosure.
type auditRow struct {
	auditJSON
	Changes []string // "rateLimitPerMinute: 0 → 60"
}

// fieldChanges lists the fields of two JSON objects that differ; for values
// that are not both objects, the whole value.
func fieldChanges(before, after json.RawMessage) []string {
	var b, a map[string]json.RawMessage
	bo := json.Unmarshal(before, &b) == nil && b != nil
	ao := json.Unmarshal(after, &a) == nil && a != nil
	switch {
	case !bo && !ao:
		return []string{fmt.Sprintf("%s → %s", before, after)}
	case !bo:
		b = map[string]json.RawMessage{}
	case !ao:
		a = map[string]json.RawMessage{}
	}
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		bv, av := compactJSON(b[k]), compactJSON(a[k])
		if bv == av {
			continue
		}
		switch {
		case !bo:
			out = append(out, k+": "+av)
		case !ao:
			out = append(out, k+": "+bv+" → (gone)")
		default:
			out = append(out, k+": "+bv+" → "+av)
		}
	}
	return out
}

func compactJSON(v json.RawMessage) string {
	if v == nil {
		return "—"
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
