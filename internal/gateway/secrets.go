package gateway

import (
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spacefix/spacefix/internal/secrets"
)

// errNoSecretKeyFile is why a gateway on PostgreSQL does not start without
// --secret-key-file: a key of its own would make the tokens other gateways
// sealed unreadable to it, and its own unreadable to them.
var errNoSecretKeyFile = errors.New("a PostgreSQL store needs --secret-key-file (or SPACEFIX_SECRET_KEY_FILE): the key that encrypts upstream tokens and identity signing keys, the same file on every gateway. Create one with: head -c 32 /dev/urandom | base64 > secret.key")

// errBusNoKeyFile is why a gateway on a bus does not start with a key in
// memory only (an embedding program's store without a file): the gateways
// sign the requests they forward to each other with the key file they
// share, and a key of its own would make every forward refused.
var errBusNoKeyFile = errors.New("a gateway on a bus (--bus) needs a secret key file shared by every gateway: give --secret-key-file (Config.SecretKeyFile); the gateways sign the requests they forward to each other with it")

// DefaultSecretKeyFile is the name of the key file a gateway on SQLite
// keeps beside the database file when --secret-key-file is not given.
const DefaultSecretKeyFile = "secret.key"

// openSecrets loads the box that seals people's upstream tokens, the
// identity signing keys and requestState, and from which the key of the
// forwards between gateways is derived (see Config.SecretKeyFile): the file given, which on PostgreSQL must exist
// already (every gateway must share it, so none makes its own) and on
// SQLite is created if missing; without one, on SQLite, secret.key beside
// the database file, created at the first start and logged once; on
// PostgreSQL, errNoSecretKeyFile; on a store it cannot place (no
// DataPath), a key in memory. A file that others than its owner may read
// is logged at WARN.
func (g *Gateway) openSecrets() (*secrets.Box, error) {
	onPostgres := isPostgresURL(g.cfg.DataPath)
	path := g.cfg.SecretKeyFile
	var (
		box     *secrets.Box
		created bool
		err     error
	)
	switch {
	case path != "" && onPostgres:
		box, err = secrets.Load(path)
	case onPostgres:
		return nil, errNoSecretKeyFile
	case path == "" && g.sqliteFile() == "":
		// A gateway built on a store it cannot place (an embedding
		// program's or a test's, with no DataPath): a key in memory only,
		// so what it seals does not outlive the process.
		g.log.Info("no secret key file: upstream tokens are sealed with a key kept in memory only, lost when the gateway stops; give Config.SecretKeyFile to keep them")
		raw, _ := base64.StdEncoding.DecodeString(secrets.NewKey())
		return secrets.New(raw)
	default:
		if path == "" {
			path = filepath.Join(filepath.Dir(g.sqliteFile()), DefaultSecretKeyFile)
		}
		box, created, err = secrets.LoadOrCreate(path)
	}
	if err != nil {
		return nil, fmt.Errorf("the secret key file (--secret-key-file): %w", err)
	}
	g.boxFile, g.boxCreated = true, created
	if created {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		g.log.Info("created the secret key file that encrypts upstream tokens and the identity signing keys; keep it and back it up with the database", "path", path)
	}
	if w := secrets.PermissionWarning(path); w != "" {
		g.log.Warn(w)
	}
	return box, nil
}

// sqliteFile is the store's file: as the store names it when it can
// (tests hand the gateway a store on a file of their own), else
// Config.DataPath; "" when neither says.
func (g *Gateway) sqliteFile() string {
	if f, ok := g.store.(interface{ Path() string }); ok && f.Path() != "" {
		return f.Path()
	}
	return g.cfg.DataPath
}

// isPostgresURL reports whether data names a PostgreSQL database, as
// cmd/spacefix decides which store to open.
func isPostgresURL(data string) bool {
	return strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
}
