package sqlshared

// Statements are statements of the SQL store body, one field a statement.
// [Q] holds them with ? placeholders, as SQLite takes them; sqlstore
// rebinds a copy for PostgreSQL ([RebindAll], [Numbered]).
type Statements struct {
	ProjectByName, ProjectByID, Projects, ProjectExists, ProjectName string
	UpdateProjectSettings                                            string

	InsertKey, KeyByHash, KeyByID, KeysOrder, KeysOfProject  string
	RevokeKey, KeyExists, SetKeyMeta, SetKeyIdentityAudience string

	InsertUser, UserByEmail, UserByID, Users, SetPassword, SetAdmin, SetUserName string
	DeleteUserSessions, DeleteUserMembers, DeleteUser, UserExists                string

	InsertSession, PruneSessions, SessionByHash, DeleteSession string

	InsertInvite, LiveInviteByHash, LiveProjectInviteByHash, Invites, RevokeInvite string

	InsertAPIToken, APITokenByHash, APITokens string

	PutUpstreamAccount, UpdateUpstreamAccount, UpstreamAccount, UpstreamKeyProject string
	UpstreamClient, PutUpstreamClient, UpstreamClients                             string
	DeleteUserUpstream, DeleteMemberUpstream, DeleteKeyUpstream                    string

	InsertIdP, IdPByIssuer, IdPs, DeleteIdP, DeleteIdPIdentities string
	LinkIdentity, IdentityUser, DeleteUserIdentities             string
	UseOnce, PruneUsedOnce                                       string

	InsertPolicy, PolicyVersions string
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
(id, project_id, kind, name, hash, read_only, tools, display_name, author, community, identity_audience, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	KeyByHash:              SelectKey + ` WHERE k.hash = ?`,
	KeyByID:                SelectKey + ` WHERE k.id = ?`,
	KeysOrder:              SelectKey + ` ORDER BY k.seq`,
	KeysOfProject:          SelectKey + ` WHERE k.project_id = ? ORDER BY k.seq`,
	RevokeKey:              `UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
	KeyExists:              `SELECT 1 FROM keys WHERE id = ?`,
	SetKeyMeta:             `UPDATE keys SET display_name = ?, author = ?, community = ? WHERE id = ?`,
	SetKeyIdentityAudience: `UPDATE keys SET identity_audience = ? WHERE id = ?`,

	InsertUser: `INSERT INTO users (email, email_key, password_hash, admin, created_at)
VALUES (?, ?, ?, ?, ?) RETURNING id`,
	UserByEmail:        SelectUser + ` WHERE email_key = ?`,
	UserByID:           SelectUser + ` WHERE id = ?`,
	Users:              SelectUser + ` ORDER BY id`,
	SetPassword:        `UPDATE users SET password_hash = ? WHERE id = ?`,
	SetAdmin:           `UPDATE users SET admin = ? WHERE id = ?`,
	SetUserName:        `UPDATE users SET name = ? WHERE id = ?`,
	DeleteUserSessions: `DELETE FROM sessions WHERE user_id = ?`,
	DeleteUserMembers:  `DELETE FROM members WHERE user_id = ?`,
	DeleteUser:         `DELETE FROM users WHERE id = ?`,
	UserExists:         `SELECT 1 FROM users WHERE id = ?`,

	InsertSession: `INSERT INTO sessions (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
	PruneSessions: `DELETE FROM sessions WHERE expires_at <= ?`,
	SessionByHash: `SELECT user_id, created_at, expires_at FROM sessions WHERE hash = ? AND expires_at > ?`,
	DeleteSession: `DELETE FROM sessions WHERE hash = ?`,

	InsertInvite: `INSERT INTO invites (id, hash, email, admin, project_id, role, created_by, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	LiveInviteByHash:        SelectInvite + ` WHERE hash = ? AND used_at IS NULL AND expires_at > ?`,
	LiveProjectInviteByHash: SelectInvite + ` WHERE hash = ? AND used_at IS NULL AND expires_at > ? AND project_id <> 0`,
	Invites:                 SelectInvite + ` WHERE used_at IS NULL AND expires_at > ? ORDER BY seq`,
	// RevokeInvite takes the time twice: the new expiry and now.
	RevokeInvite: `UPDATE invites SET expires_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?`,

	InsertAPIToken: `INSERT INTO api_tokens (id, hash, name, project_id, role, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
	APITokenByHash: SelectAPIToken + ` WHERE hash = ?`,
	APITokens:      SelectAPIToken + ` ORDER BY seq`,

	PutUpstreamAccount:    putUpstreamAccount,
	UpdateUpstreamAccount: updateUpstreamAccount,
	UpstreamAccount:       SelectUpstreamAccount + ` WHERE agent_key_id = ? AND user_id = ?`,
	UpstreamKeyProject:    upstreamKeyProject,
	UpstreamClient:        SelectUpstreamClient + ` WHERE resource = ? AND redirect_uri = ?`,
	PutUpstreamClient:     putUpstreamClient,
	UpstreamClients:       SelectUpstreamClient + ` ORDER BY resource, redirect_uri`,
	// The cascades: a person's accounts go with them, with their
	// membership of a project, and with the agent key they were for.
	DeleteUserUpstream:   `DELETE FROM upstream_accounts WHERE user_id = ?`,
	DeleteMemberUpstream: `DELETE FROM upstream_accounts WHERE project_id = ? AND user_id = ?`,
	DeleteKeyUpstream:    `DELETE FROM upstream_accounts WHERE agent_key_id = ?`,

	InsertIdP:            insertIdP,
	IdPByIssuer:          SelectIdP + ` WHERE issuer = ?`,
	IdPs:                 SelectIdP + ` ORDER BY issuer`,
	DeleteIdP:            `DELETE FROM idps WHERE issuer = ?`,
	DeleteIdPIdentities:  `DELETE FROM idp_identities WHERE issuer = ?`,
	LinkIdentity:         linkIdentity,
	IdentityUser:         `SELECT user_id FROM idp_identities WHERE issuer = ? AND subject = ?`,
	DeleteUserIdentities: `DELETE FROM idp_identities WHERE user_id = ?`,
	UseOnce:              useOnce,
	PruneUsedOnce:        `DELETE FROM used_once WHERE expires_at < ?`,

	InsertPolicy:   insertPolicy,
	PolicyVersions: policyVersions,
}
