package sqlstore

import "github.com/spacefix/spacefix/internal/store/sqlshared"

// own are the statements of this package that [sqlshared.Statements]
// does not hold, one field a statement, written with ? placeholders in
// [ownQ]; [New] rebinds them for the dialect.
type own struct {
	UseInvite, RevokeAPIToken, APITokenExists string
}

var ownQ = own{
	// UseInvite marks a live invite used and returns it, in one
	// statement: of two sign-ups with one link, on any replicas, the
	// second finds the row used once the first commits. It takes the
	// time twice: the mark and now.
	UseInvite: `UPDATE invites SET used_at = ?
WHERE hash = ? AND used_at IS NULL AND expires_at > ?
RETURNING ` + sqlshared.InviteColumns,
	RevokeAPIToken: `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
	APITokenExists: `SELECT 1 FROM api_tokens WHERE id = ?`,
}
