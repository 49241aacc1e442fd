package sqlshared

import (
	"encoding/json"

	"github.com/spacefix/spacefix/internal/store"
)

// PolicySchema is migration step 17 (each engine appends it to its list):
// the versions of each project's policy (store.Policies), and what the
// policy did with each call in the call log (store.Call.Policy). The same SQL
// runs on both engines.
const PolicySchema = `
CREATE TABLE policies (
	project_id BIGINT NOT NULL,
	version    BIGINT NOT NULL,
	document   TEXT   NOT NULL,
	updated_at BIGINT NOT NULL,
	updated_by TEXT   NOT NULL,
	PRIMARY KEY (project_id, version)
);

ALTER TABLE calls ADD COLUMN policy TEXT NOT NULL DEFAULT '';
`

// SelectPolicy selects the columns [ScanPolicy] reads.
const SelectPolicy = `SELECT project_id, version, document, updated_at, updated_by FROM policies`

// ScanPolicy scans a row of [SelectPolicy].
func ScanPolicy(row Row) (store.Policy, error) {
	var (
		p       store.Policy
		doc     string
		updated int64
	)
	if err := row.Scan(&p.ProjectID, &p.Version, &doc, &updated, &p.UpdatedBy); err != nil {
		return store.Policy{}, notFound(err)
	}
	p.Document, p.UpdatedAt = json.RawMessage(doc), FromMillis(updated)
	return p, nil
}

// The policy statements, with ? placeholders (fields of [Statements]).
const (
	// insertPolicy takes the project, the version, the document, the time
	// and who saved it. The primary key refuses a version saved twice:
	// two saves from the same version, the second one loses.
	insertPolicy = `INSERT INTO policies (project_id, version, document, updated_at, updated_by)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, version) DO NOTHING`
	policyVersions = SelectPolicy + ` WHERE project_id = ? ORDER BY version DESC LIMIT ?`
)
