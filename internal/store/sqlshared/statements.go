package sqlshared

// Statements are the statements the two stores run alike, one field a
// statement. [Q] holds them with ? placeholders, as SQLite takes them; the
// postgres store keeps Q.Numbered().
type Statements struct {
	ProjectByName, ProjectByID, Projects, ProjectExists, ProjectName string
	UpdateProjectSettings                                            string

	InsertKey, KeyByHash, KeyByID, KeysOrder, KeysOfProject string
	RevokeKey, KeyExists, SetKeyMeta                        string
}

// Q is every shared statement with ? placeholders.
var Q = Statements{
	ProjectByName:         SelectProject + ` WHERE name = ?`,
	ProjectByID:           SelectProject + ` WHERE id = ?`,
	Projects:              SelectProject + ` ORDER BY id`,
	ProjectExists:         `SELECT 1 FROM projects WHERE id = ?`,
	ProjectName:           `SELECT name FROM projects WHERE id = ?`,
	UpdateProjectSettings: `UPDATE projects SET settings = ? WHERE id = ?`,

	InsertKey: `INSERT INTO keys
(id, project_id, kind, name, hash, read_only, tools, display_name, author, community, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	KeyByHash:     SelectKey + ` WHERE k.hash = ?`,
	KeyByID:       SelectKey + ` WHERE k.id = ?`,
	KeysOrder:     SelectKey + ` ORDER BY k.seq`,
	KeysOfProject: SelectKey + ` WHERE k.project_id = ? ORDER BY k.seq`,
	RevokeKey:     `UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
	KeyExists:     `SELECT 1 FROM keys WHERE id = ?`,
	SetKeyMeta:    `UPDATE keys SET display_name = ?, author = ?, community = ? WHERE id = ?`,
}
