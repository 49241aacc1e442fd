package stateless

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// listenExtTasks serves a subscriptions/listen stream that names task ids:
// it agrees to those of the caller's tasks (the others are left out, as
// unknown), sends each one's state at once, then notifications/tasks at
// every change until the client hangs up or the endpoint closes. Changes
// of tasks this gateway runs arrive at once (Manager.Subscribe); those of
// tasks another gateway runs are read at the task's poll interval.
func (f *Tasks) listenExtTasks(w http.ResponseWriter, r *http.Request, key store.Key, req extRequest) {
	ctx := r.Context()
	owner, err := f.tasks.OwnerOf(ctx, key)
	if err != nil {
		f.log.Error("find a task's owner", "key", key.ID, "err", err)
		f.writeExtError(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgExtInternal})
		return
	}
	subID := wire.IDValue(req.ID)
	want := map[string]bool{}
	var agreed []tasks.Task
	for _, id := range req.Params.Notifications.TaskIDs {
		if want[id] || len(want) >= maxExtListenTasks {
			continue
		}
		if t, err := f.tasks.Get(ctx, owner, key.ProjectID, id); err == nil {
			want[id] = true
			agreed = append(agreed, t)
		}
	}
	changed := make(chan tasks.Task, 64)
	unsubscribe := f.tasks.Subscribe(func(t tasks.Task) {
		if !want[t.ID] || t.Owner != owner {
			return
		}
		select {
		case changed <- t:
		default: // a slow reader: the poll below catches up
		}
	})
	defer unsubscribe()

	out := &wire.SSEStream{W: w}
	ids := make([]string, 0, len(agreed))
	for _, t := range agreed {
		ids = append(ids, t.ID)
	}
	out.Notify("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": map[string]any{"taskIds": ids},
		"_meta":         map[string]any{mcp.MetaKeySubscriptionID: subID},
	})
	sent := map[string]tasks.Task{}
	send := func(t tasks.Task) {
		if prev, ok := sent[t.ID]; ok && (prev.Status.Terminal() || (prev.Status == t.Status && !t.UpdatedAt.After(prev.UpdatedAt) && prev.StatusMessage == t.StatusMessage)) {
			return // nothing new, or an older state arriving late
		}
		sent[t.ID] = t
		n := f.extDetailedTask(t, "")
		n.Meta = map[string]any{mcp.MetaKeySubscriptionID: subID}
		out.Notify("notifications/tasks", n)
	}
	for _, t := range agreed {
		send(t)
	}
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.stop:
			return
		case t := <-changed:
			send(t)
		case <-poll.C:
			for id, prev := range sent {
				if prev.Status.Terminal() {
					continue
				}
				if t, err := f.tasks.Get(ctx, owner, key.ProjectID, id); err == nil {
					send(t)
				}
			}
		}
	}
}

// maxExtListenTasks is how many tasks one subscriptions/listen stream follows;
// the ids after are left out of its agreement.
const maxExtListenTasks = 100

// AdvertiseTasks adds the tasks extension to the capabilities server/discover
// answers, when the gateway runs tasks. (Only there: a 2025 session's
// initialize declares the 2025-11-25 tasks capability instead, see
// session/tasks.go.)
func (f *Tasks) AdvertiseTasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil && f.tasks != nil && dr.Capabilities != nil {
			c := *dr.Capabilities
			c.Extensions = maps.Clone(c.Extensions)
			c.AddExtension(tasksExtension, nil)
			dr.Capabilities = &c
		}
		return res, err
	}
}
