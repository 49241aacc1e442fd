package sqlite

import (
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// runningTasksSchema is migration step 15 (sqlshared.RunningTasksSchema).
const runningTasksSchema = sqlshared.RunningTasksSchema
