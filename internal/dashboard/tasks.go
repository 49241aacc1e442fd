package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// Tasks is how the dashboard cancels a running MCP task: the gateway's
// task runtime (*tasks.Manager), which stops the agent's call on whichever
// gateway runs it.
type Tasks interface {
	Cancel(ctx context.Context, owner store.TaskOwner, projectID int64, id string) (store.Task, error)
}

// maxTasksShown bounds the Tasks page and GET …/tasks.
const maxTasksShown = 500

// taskOut is a running task as the Tasks page and the API show it; callers
// names its owners.
func taskOut(t store.Task, callers map[store.TaskOwner]string) apitypes.Task {
	return apitypes.Task{
		ID: t.ID, Tool: t.Tool, Caller: callers[t.Owner], Owner: string(t.Owner), Era: t.Era,
		Status: string(t.Status), StatusMessage: t.StatusMessage, Started: t.CreatedAt, Deadline: t.Deadline,
	}
}

// runningTasks returns a project's running tasks as shown.
func (d *Dashboard) runningTasks(ctx context.Context, projectID int64) ([]apitypes.Task, error) {
	ts, err := d.st.RunningTasks(ctx, projectID, maxTasksShown)
	if err != nil {
		return nil, err
	}
	callers, err := d.taskCallers(ctx, projectID, ts)
	if err != nil {
		return nil, err
	}
	out := make([]apitypes.Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOut(t, callers))
	}
	return out, nil
}

// taskCallers names the owners of tasks as people read them: a key's
// label, a person's email.
func (d *Dashboard) taskCallers(ctx context.Context, projectID int64, ts []store.Task) (map[store.TaskOwner]string, error) {
	keys, err := d.keyNames(ctx, projectID)
	if err != nil {
		return nil, err
	}
	out := map[store.TaskOwner]string{}
	for _, t := range ts {
		if _, ok := out[t.Owner]; ok {
			continue
		}
		kind, id, _ := strings.Cut(string(t.Owner), ":")
		name := id
		switch kind {
		case "key":
			if n := keys[id]; n != "" {
				name = n
			}
		case "user":
			if uid, err := strconv.ParseInt(id, 10, 64); err == nil {
				if u, err := d.st.UserByID(ctx, uid); err == nil {
					name = u.Email
				}
			}
		}
		out[t.Owner] = name
	}
	return out, nil
}

func (d *Dashboard) apiTasks(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	ts, err := d.runningTasks(r.Context(), p.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ts)
	return nil
}

// apiCancelTask cancels a running task of the project, whoever started it:
// its agent's call is stopped and its client reads it as cancelled.
func (d *Dashboard) apiCancelTask(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	t, err := d.st.Task(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.ProjectID != p.ID) {
		return errorf(http.StatusNotFound, "Project %s has no task %q; it may have ended and been deleted. See GET /api/projects/%s/tasks.", p.Name, id, p.Name)
	}
	if err != nil {
		return err
	}
	if d.tasks == nil {
		return errorf(http.StatusServiceUnavailable, "This gateway runs no tasks, so it cannot cancel one; cancel it on the gateway that runs it.")
	}
	before := taskOut(t, nil)
	if t, err = d.tasks.Cancel(r.Context(), t.Owner, p.ID, id); err != nil {
		return err
	}
	callers, err := d.taskCallers(r.Context(), p.ID, []store.Task{t})
	if err != nil {
		return err
	}
	after := taskOut(t, callers)
	d.log.Info("task cancelled", "project", p.Name, "task", id, "tool", t.Tool, "status", t.Status, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "task.cancel", t.Tool+" "+id, before, after)
	writeJSON(w, http.StatusOK, after)
	return nil
}

// tasksData is the Tasks page's.
type tasksData struct {
	Tasks []apitypes.Task
	Now   time.Time
}

func (d *Dashboard) tasksPage(r *http.Request, v *view) (string, error) {
	ts, err := d.runningTasks(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	v.Title, v.Tab, v.Data = "Tasks · "+v.Project.Name, "tasks", tasksData{Tasks: ts, Now: time.Now()}
	return "tasks", nil
}
