package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// backupCmd is `spacefix backup --data FILE --out FILE`: a consistent copy
// of a SQLite store, safe while gateways run on it. PostgreSQL has its own
// tools, and the secret key file is a file to copy, so both are pointed at
// rather than done here (docs/backup.md).
func backupCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("backup", stdout)
	data := dataFlag(fs)
	out := fs.String("out", "", "the `file` to write the copy to; it must not exist")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case postgres.IsURL(*data):
		return usageError{"backup copies a SQLite store; for PostgreSQL use pg_dump, as docs/backup.md shows"}
	case *out == "":
		return usageError{"backup: give --out, the file to write the copy to, e.g. --out spacefix-backup.db"}
	}
	err := sqlite.Backup(ctx, *data, *out)
	if errors.Is(err, sqlite.ErrBackupExists) {
		return fmt.Errorf("backup: %s already exists; give --out a new file name (a backup never overwrites one)", *out)
	}
	if err != nil {
		return err
	}
	size := ""
	if fi, err := os.Stat(*out); err == nil {
		size = fmt.Sprintf(" (%d KiB)", (fi.Size()+1023)/1024)
	}
	fmt.Fprintf(stdout, "Copied %s to %s%s.\n", *data, *out, size)
	key := filepath.Join(filepath.Dir(*data), gateway.DefaultSecretKeyFile)
	fmt.Fprintf(stdout, "Keep the secret key file with it (%s, or your --secret-key-file): the copy's sealed secrets open only with that key.\n", key)
	return nil
}
