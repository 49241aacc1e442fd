package sqlite

import (
	"context"
	"fmt"
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
	if err != nil || !os.SameFile(fi, s.opened) {
		return fmt.Errorf("store file %s was deleted or replaced while the gateway ran; restart the gateway", name)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO meta (key, value, updated_at) VALUES ('ready_probe', ?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		strconv.Itoa(os.Getpid()), millis(now()))
	if err != nil {
		return fmt.Errorf("store file %s does not take writes (%v); free disk space or fix the file's permissions", name, err)
	}
	return nil
}
