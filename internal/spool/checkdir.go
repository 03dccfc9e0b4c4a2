package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// CheckDir makes sure a pass can make its scratch folders under dir, the
// configured sync.spool_dir (the system's temporary folder when it is
// empty), where a large batch is spooled and a batch's file waits while
// BigQuery loads it: it makes one there, as a pass does, and removes it.
// The folder itself is never created, by this check or by a pass: one
// that does not exist is the operator's to create (or the setting's to
// change); the error says which, in the config's words. It returns the
// folder it checked.
func CheckDir(dir string) (string, error) {
	what := "sync.spool_dir " + dir
	fix := "set sync.spool_dir to a writable folder (large batches are spooled there)"
	if dir == "" {
		dir = os.TempDir()
		what = "the temporary folder " + dir + " (sync.spool_dir is empty: TMPDIR sets it)"
		fix = "set sync.spool_dir, or TMPDIR, to a writable folder (large batches are spooled there)"
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dir, fmt.Errorf("%s does not exist: create it, or %s", what, fix)
	case err != nil:
		return dir, fmt.Errorf("%s cannot be read (%v): %s", what, err, fix)
	case !fi.IsDir():
		return dir, fmt.Errorf("%s is not a folder: %s", what, fix)
	}
	scratch, err := TempDir(dir)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // the mkdir's error; TempDir's own words repeat what and fix
		}
		return dir, fmt.Errorf("%s cannot be written (%v): make it writable for the user syncd runs as, or %s", what, err, fix)
	}
	if err := os.Remove(scratch); err != nil {
		return dir, fmt.Errorf("%s: the scratch folder %s could not be removed (%v): syncd must be able to delete what it makes there; make it writable for the user syncd runs as, or %s", what, scratch, err, fix)
	}
	return dir, nil
}
