package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// auditCmd reads the audit log from the store.
func auditCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "audit", args, stdout, command{"list", auditList})
}

func auditList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("audit list", stdout)
	data := dataFlag(fs)
	project := fs.String("project", "", "the project `name`; empty lists the instance's entries (users, invites, instance tokens)")
	action := fs.String("action", "", "only this `action`, or a prefix ending in a dot (tool.)")
	actor := fs.String("actor", "", "only changes by this `actor` (an email, \"token tok_… (name)\" or \"cli\")")
	limit := fs.Int("limit", 50, fmt.Sprintf("at most this many entries, newest first (1 to %d)", store.MaxAuditPage))
	before := fs.Int64("before", 0, "only entries older than this entry `id` (the next page)")
	asJSON := fs.Bool("json", false, "print JSON, one entry per line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > store.MaxAuditPage {
		return usageError{fmt.Sprintf("audit list: --limit must be 1 to %d", store.MaxAuditPage)}
	}
	return withStore(ctx, *data, func(st store.Store) error {
		f := store.AuditFilter{Action: *action, Actor: *actor, Limit: *limit, BeforeID: *before}
		if *project != "" {
			p, err := st.Project(ctx, *project)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no project %q; see spacefix projects list", *project)
			} else if err != nil {
				return err
			}
			f.ProjectID = p.ID
		}
		es, err := st.Audit(ctx, f)
		if err != nil {
			return err
		}
		if *asJSON {
			return printEach(stdout, es, true, func(e store.AuditEntry) any {
				return map[string]any{
					"id": e.ID, "at": e.At, "actor": e.Actor, "addr": e.Addr, "action": e.Action,
					"target": e.Target, "before": e.Before, "after": e.After,
				}
			})
		}
		t := newTable(stdout, "ID", "WHEN (UTC)", "WHO", "FROM", "ACTION", "TARGET", "BEFORE", "AFTER")
		for _, e := range es {
			t.row(fmt.Sprint(e.ID), e.At.UTC().Format(time.DateTime), e.Actor, orDash(e.Addr), e.Action, e.Target, string(e.Before), string(e.After))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(es) == f.PageSize() {
			fmt.Fprintf(stdout, "\nOlder entries: add --before %d\n", es[len(es)-1].ID)
		}
		return nil
	})
}
