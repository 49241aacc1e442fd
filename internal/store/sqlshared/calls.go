package sqlshared

import (
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// SelectCalls selects the columns [ScanCall] reads.
const SelectCalls = `SELECT id, started_at, project_id, kind, name, key_id, agent, replica, duration_us, outcome, error, progress, billable, task_id, call_id, replay, retry_of, policy FROM calls`

// CallsQuery returns the query for f, with placeholders from param, and
// its arguments.
func CallsQuery(f store.CallFilter, param Param) (string, []any) {
	w := where{param: param}
	if f.ProjectID != 0 {
		w.add("project_id =", f.ProjectID)
	}
	if f.Name != "" {
		w.add("name =", f.Name)
	}
	if f.Outcome != "" {
		w.add("outcome =", f.Outcome)
	}
	if f.KeyID != "" {
		w.add("key_id =", f.KeyID)
	}
	if !f.Since.IsZero() {
		w.add("started_at >=", Millis(f.Since))
	}
	if f.AfterID > 0 {
		w.add("id >", f.AfterID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	args := append(w.args, limit)
	return SelectCalls + w.clause() + ` ORDER BY started_at DESC, id DESC LIMIT ` + param(len(args)), args
}

// ScanCall scans a row of [SelectCalls].
func ScanCall(row Row) (store.Call, error) {
	var (
		c          store.Call
		started    int64
		durationUS int64
		progress   string
	)
	if err := row.Scan(&c.ID, &started, &c.ProjectID, &c.Kind, &c.Name, &c.KeyID, &c.Agent, &c.Replica,
		&durationUS, &c.Outcome, &c.Error, &progress, &c.Billable, &c.TaskID,
		&c.CallID, &c.Replay, &c.RetryOf, &c.Policy); err != nil {
		return store.Call{}, err
	}
	c.Time = FromMillis(started)
	c.Duration = time.Duration(durationUS) * time.Microsecond
	list, err := store.DecodeList(progress)
	if err != nil {
		return store.Call{}, fmt.Errorf("decode progress of call %d: %w", c.ID, err)
	}
	c.Progress = list
	return c, nil
}

// ScanUsage scans a row of day, kind, name and count.
func ScanUsage(row Row) (store.Usage, error) {
	var (
		u  store.Usage
		ms int64
	)
	if err := row.Scan(&ms, &u.Kind, &u.Name, &u.Calls); err != nil {
		return store.Usage{}, err
	}
	u.Day = FromMillis(ms)
	return u, nil
}
