package sqlite

import "github.com/spacefix/spacefix/internal/store/sqlshared"

// userNameSchema is migration step 13 (sqlshared.UserNameSchema).
var userNameSchema = sqlshared.UserNameSchema

// enterpriseSchema is migration step 16 (sqlshared.EnterpriseSchema).
var enterpriseSchema = sqlshared.EnterpriseSchema
