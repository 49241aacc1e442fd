package sqlshared

import (
	"encoding/json"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

// SelectProject selects the columns [ScanProject] reads.
const SelectProject = `SELECT id, name, created_at, settings FROM projects`

// ScanProject scans a row of [SelectProject].
func ScanProject(row Row) (store.Project, error) {
	var (
		p        store.Project
		created  int64
		settings string
	)
	if err := row.Scan(&p.ID, &p.Name, &created, &settings); err != nil {
		return store.Project{}, notFound(err)
	}
	p.CreatedAt = FromMillis(created)
	if err := json.Unmarshal([]byte(settings), &p.Settings); err != nil {
		return store.Project{}, fmt.Errorf("decode settings: %w", err)
	}
	return p, nil
}

// SelectKey selects the columns [ScanKey] reads.
const SelectKey = `SELECT k.id, k.project_id, p.name, k.kind, k.name, k.read_only, k.tools,
k.display_name, k.author, k.community, k.identity_audience, k.created_at, k.revoked_at
FROM keys k JOIN projects p ON p.id = k.project_id`

// ScanKey scans a row of [SelectKey].
func ScanKey(row Row) (store.Key, error) {
	var (
		k       store.Key
		tools   string
		created int64
		revoked *int64
	)
	err := row.Scan(&k.ID, &k.ProjectID, &k.ProjectName, &k.Kind, &k.Name, &k.ReadOnly, &tools,
		&k.DisplayName, &k.Author, &k.Community, &k.IdentityAudience, &created, &revoked)
	if err != nil {
		return store.Key{}, notFound(err)
	}
	list, err := store.DecodeList(tools)
	if err != nil {
		return store.Key{}, fmt.Errorf("decode tools of key %q: %w", k.ID, err)
	}
	k.Tools = list
	k.CreatedAt = FromMillis(created)
	k.RevokedAt = FromNullMillis(revoked)
	return k, nil
}
