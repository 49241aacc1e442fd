package sqlite

import (
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// upstreamSchema is migration step 11 (sqlshared.UpstreamSchema).
var upstreamSchema = sqlshared.UpstreamSchema("BLOB")

// upstreamIndicatorSchema is migration step 12.
var upstreamIndicatorSchema = sqlshared.UpstreamIndicatorSchema

// upstreamFlowSchema is migration step 14.
var upstreamFlowSchema = sqlshared.UpstreamFlowSchema
