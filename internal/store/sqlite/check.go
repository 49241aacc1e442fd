package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Check reports whether the store can take writes: the file at the path it
// was opened with must still be the file it opened (a deleted or replaced
// file keeps working for this process, but nothing it writes survives a
// restart), and a small write must commit. The write is an upsert of one
// row of the meta table, so the probe never grows the file.
func (s *Store) Check(ctx context.Context) error {
	name := s.path
	if abs, err := filepath.Abs(s.path); err == nil {
		name = abs // an operator reads this far from the gateway's directory
	}
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the database file %s was deleted while the gateway runs; what it writes goes to a file no one can open again. "+
			"Restore the file from a backup before you restart the gateway: without it the gateway starts empty, every key gone", name)
	case err == nil && !os.SameFile(fi, s.opened):
		return fmt.Errorf("the database file %s was replaced while the gateway runs; the gateway still writes to the old file, which no one can open again. "+
			"Restart the gateway to use the new file, or put the old one back from a backup", name)
	case err != nil:
		return fmt.Errorf("the database file %s cannot be checked (%v); fix the permissions of its directory", name, err)
	}
	if err := s.CheckWrite(ctx, strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("store file %s does not take writes (%v); free disk space or fix the file's permissions", name, err)
	}
	return nil
}
