package store

import (
	"context"
	"encoding/json"
	"time"
)

// Policy is one saved version of a project's policy: its rules and
// interceptor servers (package policy reads Document).
type Policy struct {
	ProjectID int64
	Version   int64           // from 1; 0: the project never saved one
	Document  json.RawMessage // the document as saved; empty when Version is 0
	UpdatedAt time.Time
	UpdatedBy string // who saved it: a person's e-mail, or an API token's name
}

// Policies keeps each project's policy, versioned: a save adds a version,
// and every gateway reads the newest.
type Policies interface {
	// Policy returns a project's newest policy; Version 0 and no document
	// when none was saved.
	Policy(ctx context.Context, projectID int64) (Policy, error)
	// SavePolicy saves doc as a project's next version, if its newest is
	// still prev (0: none yet), and returns the version saved;
	// ErrConflict when another save came first.
	SavePolicy(ctx context.Context, projectID, prev int64, doc json.RawMessage, by string) (Policy, error)
	// PolicyVersions lists a project's saved versions, newest first, at
	// most limit of them.
	PolicyVersions(ctx context.Context, projectID int64, limit int) ([]Policy, error)
}
