package postgres

import (
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// enterpriseSchema is migration step 16 (sqlshared.EnterpriseSchema).
var enterpriseSchema = sqlshared.EnterpriseSchema
