package sqlshared

import "github.com/spacefix/spacefix/internal/store"

// RunningTasksSchema is migration step 15: indexes of the tasks that have
// not ended, which a gateway reads at every task start (how many its
// caller runs, against the project's running tasks per caller) and in its
// sweeps (the gateways that run some, the ones past their deadline). They
// are partial, so that the many ended tasks kept for their TTL cost them
// nothing; a query uses them when it says [TaskRunning] word for word.
const RunningTasksSchema = `
CREATE INDEX tasks_running_owner ON tasks (project_id, owner) WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_running_deadline ON tasks (deadline) WHERE status IN ('working', 'input_required');
`

// TaskRunning is the condition of a task that has not ended, as the
// partial indexes of [RunningTasksSchema] spell it.
const TaskRunning = `status IN ('working', 'input_required')`

// Queries of the tasks that have not ended, with ? placeholders
// ([Numbered] turns them into PostgreSQL's).
const (
	CountRunningTasks = `SELECT COUNT(*) FROM tasks WHERE project_id = ? AND owner = ? AND ` + TaskRunning
	TaskGateways      = `SELECT DISTINCT gateway FROM tasks WHERE ` + TaskRunning
	OverdueTasks      = `SELECT ` + store.TaskColumns + ` FROM tasks WHERE deadline < ? AND ` + TaskRunning +
		` ORDER BY deadline, id LIMIT ?`
)
