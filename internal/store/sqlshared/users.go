package sqlshared

import "github.com/spacefix/spacefix/internal/store"

// SelectUser selects the columns [ScanUser] reads.
const SelectUser = `SELECT id, email, admin, created_at, password_hash, name FROM users`

// ScanUser scans a row of [SelectUser], the password hash into hash.
func ScanUser(row Row, hash *string) (store.User, error) {
	var (
		u       store.User
		created int64
	)
	if err := row.Scan(&u.ID, &u.Email, &u.Admin, &created, hash, &u.Name); err != nil {
		return store.User{}, notFound(err)
	}
	u.CreatedAt = FromMillis(created)
	return u, nil
}

// UserNameSchema is migration step 13: the name a person gives
// themselves (store.User.Name), empty until they do.
const UserNameSchema = `ALTER TABLE users ADD COLUMN name TEXT NOT NULL DEFAULT '';`

// ScanUserOnly is [ScanUser] without the password hash.
func ScanUserOnly(row Row) (store.User, error) {
	var hash string
	return ScanUser(row, &hash)
}

// ScanSession scans a row of [Statements.SessionByHash].
func ScanSession(row Row) (store.Session, error) {
	var (
		sess             store.Session
		created, expires int64
	)
	if err := row.Scan(&sess.UserID, &created, &expires); err != nil {
		return store.Session{}, notFound(err)
	}
	sess.CreatedAt, sess.ExpiresAt = FromMillis(created), FromMillis(expires)
	return sess, nil
}

// InviteColumns are the columns [ScanInvite] reads.
const InviteColumns = `id, email, admin, project_id, role, created_by, created_at, expires_at, used_at`

// SelectInvite selects [InviteColumns].
const SelectInvite = `SELECT ` + InviteColumns + ` FROM invites`

// ScanInvite scans a row of [InviteColumns].
func ScanInvite(row Row) (store.Invite, error) {
	var (
		inv              store.Invite
		created, expires int64
		used             *int64
	)
	if err := row.Scan(&inv.ID, &inv.Email, &inv.Admin, &inv.ProjectID, (*string)(&inv.Role), &inv.CreatedBy, &created, &expires, &used); err != nil {
		return store.Invite{}, notFound(err)
	}
	inv.CreatedAt, inv.ExpiresAt, inv.UsedAt = FromMillis(created), FromMillis(expires), FromNullMillis(used)
	return inv, nil
}

// SelectAPIToken selects the columns [ScanAPIToken] reads.
const SelectAPIToken = `SELECT id, name, project_id, role, created_by, created_at, revoked_at FROM api_tokens`

// ScanAPIToken scans a row of [SelectAPIToken].
func ScanAPIToken(row Row) (store.APIToken, error) {
	var (
		tok     store.APIToken
		created int64
		revoked *int64
	)
	if err := row.Scan(&tok.ID, &tok.Name, &tok.ProjectID, (*string)(&tok.Role), &tok.CreatedBy, &created, &revoked); err != nil {
		return store.APIToken{}, notFound(err)
	}
	tok.CreatedAt, tok.RevokedAt = FromMillis(created), FromNullMillis(revoked)
	return tok, nil
}
