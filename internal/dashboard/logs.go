package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Live tail timing.
const (
	tailPoll      = time.Second
	tailKeepAlive = 15 * time.Second
	tailBatch     = 500
	maxCallLimit  = 1000
)

// callJSON is one call log record.
type callJSON struct {
	ID         int64     `json:"id"`
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	Key        string    `json:"key"`
	KeyName    string    `json:"keyName,omitempty"` // the key's label, what people read
	Agent      string    `json:"agent"`
	Replica    string    `json:"replica"`
	DurationMs float64   `json:"durationMs"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error,omitempty"`
	Progress   []string  `json:"progress"`
	TaskID     string    `json:"taskId,omitempty"` // the MCP task (or job) the call ran as
	CallID     string    `json:"callId,omitempty"` // the gateway's id of the call, as its agent saw it
	// Replay marks a repeat of a request id answered with an earlier
	// call's result (no agent reached, not billed); RetryOf is that call,
	// or, without Replay, the call with an unknown outcome this one
	// delivers again.
	Replay  bool   `json:"replay,omitempty"`
	RetryOf string `json:"retryOf,omitempty"`
}

// callOut is a record as the Logs page and the API show it; names maps key
// IDs to their labels.
func callOut(c store.Call, names map[string]string) callJSON {
	p := c.Progress
	if p == nil {
		p = []string{}
	}
	return callJSON{
		ID: c.ID, Time: c.Time, Kind: c.Kind, Name: c.Name, Key: c.KeyID, KeyName: names[c.KeyID], Agent: c.Agent, Replica: c.Replica,
		DurationMs: float64(c.Duration.Microseconds()) / 1000, Outcome: c.Outcome, Error: c.Error, Progress: p,
		TaskID: c.TaskID, CallID: c.CallID, Replay: c.Replay, RetryOf: c.RetryOf,
	}
}

// callFilter reads the filters of the Logs page and the API from a query:
// tool, outcome, key, after (an ID), limit.
func callFilter(r *http.Request, projectID int64) (store.CallFilter, error) {
	q := r.URL.Query()
	f := store.CallFilter{ProjectID: projectID, Name: q.Get("tool"), Outcome: q.Get("outcome"), KeyID: q.Get("key"), Limit: 100}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"after", &f.AfterID}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return f, fieldError(p.name, "want a call id, not %q", v)
			}
			*p.dst = n
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCallLimit {
			return f, fieldError("limit", "want 1 to %d, not %q", maxCallLimit, v)
		}
		f.Limit = n
	}
	return f, nil
}

func (d *Dashboard) apiCalls(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	f, err := callFilter(r, p.ID)
	if err != nil {
		return err
	}
	cs, err := d.st.Calls(r.Context(), f)
	if err != nil {
		return err
	}
	names, err := d.keyNames(r.Context(), p.ID)
	if err != nil {
		return err
	}
	d.nameDisconnectedApps(r.Context(), names, cs)
	out := make([]callJSON, 0, len(cs))
	for _, c := range cs {
		out = append(out, callOut(c, names))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiCallStream is the live tail: server-sent events, one "call" event per
// record as it is written, oldest first. It polls the store every second,
// so records written by any gateway sharing the store show up. Without
// "after", it starts after the newest record there is.
func (d *Dashboard) apiCallStream(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	f, err := callFilter(r, p.ID)
	if err != nil {
		return err
	}
	if f.AfterID == 0 {
		newest, err := d.st.Calls(r.Context(), store.CallFilter{ProjectID: p.ID, Limit: 1})
		if err != nil {
			return err
		}
		for _, c := range newest {
			f.AfterID = c.ID
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": tailing\n\n")
	rc.Flush()
	d.tail(r.Context(), w, rc, f)
	return nil
}

// keyNames maps the IDs of a project's keys to their labels, for people
// to read in the Logs; a key without a label is shown by its ID. A call
// made with an OAuth token carries its connected app's id ("app_…"): it
// is named by the app and the person who connected it.
func (d *Dashboard) keyNames(ctx context.Context, projectID int64) (map[string]string, error) {
	ks, err := d.st.Keys(ctx, projectID)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ks))
	for _, k := range ks {
		if k.Name != "" {
			names[k.ID] = k.Name
		}
	}
	gs, err := d.st.OAuthGrants(ctx, projectID)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		names[g.ID] = appName(g)
	}
	return names, nil
}

// appName is how the Logs name a connected app: its name (as it gave it)
// and the person who connected it.
func appName(g store.OAuthGrant) string {
	return fmt.Sprintf("%s (app of %s)", cmp.Or(g.ClientName, "unnamed app"), cmp.Or(g.UserEmail, "a removed person"))
}

// nameDisconnectedApps adds to names the apps of calls that were
// disconnected since (OAuthGrants lists live ones only).
func (d *Dashboard) nameDisconnectedApps(ctx context.Context, names map[string]string, cs []store.Call) {
	for _, c := range cs {
		if _, ok := names[c.KeyID]; ok || !strings.HasPrefix(c.KeyID, "app_") {
			continue
		}
		g, err := d.st.OAuthGrant(ctx, c.KeyID)
		if err != nil {
			names[c.KeyID] = "" // not to ask again
			continue
		}
		names[c.KeyID] = appName(g) + ", disconnected"
	}
}

func (d *Dashboard) tail(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, f store.CallFilter) {
	poll := time.NewTicker(tailPoll)
	defer poll.Stop()
	lastWrite := time.Now()
	f.Limit = tailBatch
	names, _ := d.keyNames(ctx, f.ProjectID)
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		case <-poll.C:
		}
		cs, err := d.st.Calls(ctx, f)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("live log tail", "err", err)
			}
			continue
		}
		for i := len(cs) - 1; i >= 0; i-- { // oldest first
			if _, ok := names[cs[i].KeyID]; !ok && cs[i].KeyID != "" {
				if fresh, err := d.keyNames(ctx, f.ProjectID); err == nil {
					names = fresh // a key made since the tail started
				}
			}
			b, _ := json.Marshal(callOut(cs[i], names))
			fmt.Fprintf(w, "id: %d\nevent: call\ndata: %s\n\n", cs[i].ID, b)
			f.AfterID = max(f.AfterID, cs[i].ID)
		}
		if len(cs) == 0 && time.Since(lastWrite) < tailKeepAlive {
			continue
		}
		if len(cs) == 0 {
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		if rc.Flush() != nil {
			return
		}
		lastWrite = time.Now()
	}
}

// usageJSON is billable calls for a range of days.
type usageJSON struct {
	From  string      `json:"from"`
	To    string      `json:"to"`
	Total int64       `json:"total"`
	Days  []dayUsage  `json:"days"`
	Tools []nameUsage `json:"tools"`
}

type dayUsage struct {
	Day   string `json:"day"` // YYYY-MM-DD, UTC
	Calls int64  `json:"calls"`
}

type nameUsage struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Calls int64  `json:"calls"`
}

// usageRange reads from and to (YYYY-MM-DD, UTC) from a query; the default
// is the last 14 days. At most 366 days.
func usageRange(r *http.Request) (from, to time.Time, err error) {
	now := time.Now().UTC()
	to = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	from = to.AddDate(0, 0, -13)
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := r.URL.Query().Get(p.name); v != "" {
			t, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return from, to, fieldError(p.name, "want a day such as 2026-03-01, not %q", v)
			}
			*p.dst = t
		}
	}
	if to.Before(from) {
		return from, to, fieldError("to", "the range ends before it starts")
	}
	if to.Sub(from) > 366*24*time.Hour {
		return from, to, fieldError("from", "the range is at most 366 days")
	}
	return from, to, nil
}

func (d *Dashboard) usage(ctx context.Context, projectID int64, from, to time.Time) (usageJSON, error) {
	us, err := d.st.Usage(ctx, projectID, from, to)
	if err != nil {
		return usageJSON{}, err
	}
	out := usageJSON{From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Days: []dayUsage{}, Tools: []nameUsage{}}
	perDay := make(map[string]int64)
	perName := make(map[[2]string]int64)
	for _, u := range us {
		perDay[u.Day.Format(time.DateOnly)] += u.Calls
		perName[[2]string{u.Kind, u.Name}] += u.Calls
		out.Total += u.Calls
	}
	for day := from; !day.After(to); day = day.AddDate(0, 0, 1) {
		k := day.Format(time.DateOnly)
		out.Days = append(out.Days, dayUsage{Day: k, Calls: perDay[k]})
	}
	for k, n := range perName {
		out.Tools = append(out.Tools, nameUsage{Kind: k[0], Name: k[1], Calls: n})
	}
	sortUsage(out.Tools)
	return out, nil
}

func (d *Dashboard) apiUsage(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	from, to, err := usageRange(r)
	if err != nil {
		return err
	}
	out, err := d.usage(r.Context(), p.ID, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
