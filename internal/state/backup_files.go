package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// BackupPrefix starts the name of every backup written into a folder or
// bucket prefix, so that PruneBackups finds them (and only them).
const BackupPrefix = "syncd-state-"

// backupStamp is the UTC time in a backup's name, after BackupPrefix.
const backupStamp = "20060102T150405Z"

// Location is where the configured state lives: URL, a state object (split
// by account), or else Path, a state file.
type Location struct {
	URL  string
	Path string
}

// Backup writes a consistent copy of the state to w (BackupObject or
// BackupBolt).
func (l Location) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if l.URL != "" {
		return BackupObject(ctx, l.URL, w)
	}
	return BackupBolt(ctx, l.Path, w)
}

// Restore replaces the state with the backup raw, read from src (a path or
// a bucket URL), after checking it whole: RestoreObject, or RestoreBolt
// from src itself or, for a URL, from a temporary copy of raw. aside is the
// state file the restore replaced, kept beside it ("" for a state object,
// which keeps its own, or when there was none).
func (l Location) Restore(ctx context.Context, leaseTTL time.Duration, src string, raw []byte) (info BackupInfo, aside string, err error) {
	if l.URL != "" {
		info, err = RestoreObject(ctx, ObjectOptions{URL: l.URL, LeaseTTL: leaseTTL}, raw)
		return info, "", err
	}
	local := src
	if blobstore.IsURL(src) {
		// The backup is checked by opening it with bbolt, which needs a file.
		dir, err := os.MkdirTemp("", "syncd-restore-")
		if err != nil {
			return info, "", fmt.Errorf("restore state file %s: %w", l.Path, err)
		}
		defer os.RemoveAll(dir)
		local = filepath.Join(dir, "backup.db")
		if err := os.WriteFile(local, raw, 0o600); err != nil {
			return info, "", fmt.Errorf("restore state file %s: %w", l.Path, err)
		}
	}
	return RestoreBolt(ctx, l.Path, local)
}

// BackupTarget is where a backup to dest is written at now: dest, or in a
// folder or bucket prefix (IsFolder) a new file named by the time.
func (l Location) BackupTarget(dest string, now time.Time) string {
	if !IsFolder(dest) {
		return dest
	}
	ext := ".db"
	if l.URL != "" {
		ext = ".json"
	}
	return joinName(dest, BackupPrefix+now.UTC().Format(backupStamp)+ext)
}

// Part says what of the state target names: "the state" (the same path or
// object once resolved, or the same file under another name), "the lock
// file of the state" (<path>.lock, which a writer holds), for a state
// object "the lease of the state" (<url>.lease), "the index of the state"
// (under <url>.index/) or "an account's state beside the state" (under
// <url>.accounts/); "" when none of them. A backup written over any of
// them would break the state a running syncd holds.
func (l Location) Part(target string) string {
	if l.URL != "" {
		t, err1 := url.Parse(target)
		s, err2 := url.Parse(l.URL)
		if err1 != nil || err2 != nil || !blobstore.IsURL(target) || t.Scheme != s.Scheme || t.Host != s.Host {
			return ""
		}
		tp, sp := path.Clean("/"+t.Path), path.Clean("/"+s.Path)
		switch {
		case tp == sp:
			return "the state"
		case tp == sp+".lease":
			return "the lease of the state"
		case strings.HasPrefix(tp, sp+".index/"):
			return "the index of the state"
		case strings.HasPrefix(tp, sp+accountsDir):
			return "an account's state beside the state"
		}
		return ""
	}
	if blobstore.IsURL(target) {
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "file" {
			return ""
		}
		target = filepath.FromSlash(u.Path)
	}
	for _, c := range []struct{ path, part string }{
		{l.Path, "the state"},
		{l.Path + ".lock", "the lock file of the state"},
	} {
		if sameFile(target, c.path) {
			return c.part
		}
	}
	return ""
}

// sameFile reports whether the paths a and b name one file: the same path
// once made absolute, or the same file under another name.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// IsFolder reports whether dest names a folder or a bucket prefix: it ends
// in '/' (before any query), or is a local folder that exists.
func IsFolder(dest string) bool {
	if blobstore.IsURL(dest) {
		u, err := url.Parse(dest)
		return err == nil && strings.HasSuffix(u.Path, "/")
	}
	if strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, string(filepath.Separator)) {
		return true
	}
	fi, err := os.Stat(dest)
	return err == nil && fi.IsDir()
}

// joinName appends a file name to a folder or bucket prefix.
func joinName(dir, name string) string {
	if blobstore.IsURL(dir) {
		u, _ := url.Parse(dir)
		u.Path = path.Join(u.Path, name)
		return u.String()
	}
	return filepath.Join(dir, name)
}

// openAt opens the bucket of a URL naming an object, keyed from its
// folder, and returns the object's name in it.
func openAt(ctx context.Context, raw string) (*blob.Bucket, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	dir, name := path.Split(u.Path)
	u.Path = dir
	loc, err := blobstore.Parse(u.String())
	if err != nil {
		return nil, "", err
	}
	b, err := blobstore.Open(ctx, loc, true)
	return b, name, err
}

// WriteBackup writes a backup to target, a path or a bucket URL: a file is
// written beside it, fsync'd and renamed into place, so that a stop never
// leaves half a backup under its name; an object is uploaded whole.
func WriteBackup(ctx context.Context, target string, raw []byte) error {
	if !blobstore.IsURL(target) {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		tmp := target + ".tmp"
		if err := os.WriteFile(tmp, raw, 0o600); err != nil {
			return err
		}
		f, err := os.Open(tmp)
		if err == nil {
			err = errors.Join(f.Sync(), f.Close())
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, target)
	}
	b, name, err := openAt(ctx, target)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Upload(ctx, name, bytes.NewReader(raw), &blob.WriterOptions{ContentType: "application/octet-stream"})
}

// ReadBackup reads the backup at src, a path or a bucket URL.
func ReadBackup(ctx context.Context, src string) ([]byte, error) {
	if !blobstore.IsURL(src) {
		return os.ReadFile(src)
	}
	b, name, err := openAt(ctx, src)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.ReadAll(ctx, name)
}

// isBackupName reports whether name is one a backup into a folder is
// written under: BackupPrefix, its UTC time, .db or .json.
func isBackupName(name string) bool {
	stamp, ok := strings.CutPrefix(name, BackupPrefix)
	if !ok {
		return false
	}
	ext := path.Ext(stamp)
	if ext != ".db" && ext != ".json" {
		return false
	}
	_, err := time.Parse(backupStamp, strings.TrimSuffix(stamp, ext))
	return err == nil
}

// PruneBackups deletes all but the newest keep backups in dir, a folder or
// bucket prefix, and returns what it deleted; the names carry their UTC
// time, so their order is their age. Only names a backup is written under
// count, and never the state or a file the state keeps beside it (Part),
// should the state live there under such a name.
func (l Location) PruneBackups(ctx context.Context, dir string, keep int) ([]string, error) {
	backup := func(name string) bool {
		return isBackupName(name) && l.Part(joinName(dir, name)) == ""
	}
	var names []string
	if !blobstore.IsURL(dir) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && backup(e.Name()) {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		var removed []string
		for len(names) > keep {
			p := filepath.Join(dir, names[0])
			if err := os.Remove(p); err != nil {
				return removed, err
			}
			removed = append(removed, p)
			names = names[1:]
		}
		return removed, nil
	}
	b, _, err := openAt(ctx, joinName(dir, "x"))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	it := b.List(&blob.ListOptions{Prefix: BackupPrefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !obj.IsDir && backup(obj.Key) {
			names = append(names, obj.Key)
		}
	}
	sort.Strings(names)
	var removed []string
	for len(names) > keep {
		if err := b.Delete(ctx, names[0]); err != nil {
			return removed, err
		}
		removed = append(removed, joinName(dir, names[0]))
		names = names[1:]
	}
	return removed, nil
}
