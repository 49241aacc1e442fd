package postgres

import "github.com/spacefix/spacefix/internal/store/sqlshared"

// userNameSchema is migration step 13 (sqlshared.UserNameSchema).
var userNameSchema = sqlshared.UserNameSchema
