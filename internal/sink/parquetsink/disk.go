package parquetsink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/syncd-dev/syncd/internal/logkey"

	"github.com/apache/arrow-go/v18/parquet/file"
	"go.uber.org/zap"
)

// tmpMarker sits in every temporary file name, after a leading "." that
// makes DuckDB, Spark and Hive skip the file.
const tmpMarker = ".parquet.tmp-"

// purgePrefix starts the hidden name a table's folder is moved to while
// Purge removes it, so readers see the whole table or none of it.
const purgePrefix = ".purge-"

// diskStore is Storage in a local folder. A file is written under a
// hidden temporary name, synced, and renamed into place, and the folders
// are synced, so readers see it whole or not at all and it survives a
// power cut. Put's IfAbsent is kept by there being one writer (the
// state's lock across processes, the sink's per-batch lock within one).
type diskStore struct {
	root string
	log  *zap.Logger

	// Test hooks, called around the rename of a Put.
	beforeRename func(tmp, final string)
	afterRename  func(tmp, final string)
}

var _ Storage = (*diskStore)(nil)

// openDisk opens the folder root, creating it if needed, and removes
// temporary files left behind by a crashed writer.
func openDisk(root string, log *zap.Logger, keepTemp bool) (*diskStore, error) {
	if root == "" {
		return nil, errors.New("parquet sink: no folder given: set sink.parquet.path")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: resolve %s: %w", root, err)
	}
	switch fi, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		// 0777 less the umask, as for every folder the sink makes.
		if err := os.MkdirAll(abs, 0o777); err != nil {
			return nil, fmt.Errorf("parquet sink: create folder %s: %w", abs, hint(err))
		}
	case err != nil:
		return nil, fmt.Errorf("parquet sink: open folder %s: %w", abs, hint(err))
	case !fi.IsDir():
		return nil, fmt.Errorf("parquet sink: %s is not a folder: point sink.parquet.path at a folder", abs)
	}
	if log == nil {
		log = zap.NewNop()
	}
	d := &diskStore{root: abs, log: log}
	if !keepTemp {
		d.cleanStale()
	}
	return d, nil
}

// Probe creates and removes a hidden file in the folder (StorageProber).
func (d *diskStore) Probe(context.Context) (string, error) {
	dir := d.root
	fix := "make it writable for the user syncd runs as, or set sink.parquet.path to a folder it can write"
	f, err := os.CreateTemp(dir, ProbeName()+"-*")
	if err != nil {
		return "", fmt.Errorf("output folder %s cannot be written (%v): %s", dir, err, fix)
	}
	name := f.Name()
	_, werr := f.Write([]byte("syncd validate probe\n"))
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return "", fmt.Errorf("output folder %s cannot be written (%v): %s", dir, err, fix)
	}
	if rerr != nil {
		return "", fmt.Errorf("output folder %s: the probe file %s could not be removed (%v): syncd must be able to delete files there (refresh removes a table's files)", dir, filepath.Base(name), rerr)
	}
	return "a probe file was written and deleted", nil
}

// ProbeName is a hidden name for a probe file or object, random so that
// two probes never meet.
func ProbeName() string {
	return ".syncd-probe-" + strconv.FormatUint(rand.Uint64(), 16)
}

func (d *diskStore) String() string { return d.root }

func (d *diskStore) Close() error { return nil }

// path is the file of key.
func (d *diskStore) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

// cleanStale removes every temporary file under the root. They are
// invisible to readers, so this only frees space; failures are logged.
func (d *diskStore) cleanStale() {
	removed := 0
	err := filepath.WalkDir(d.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			d.log.Warn("cannot read a folder while cleaning temporary files", zap.String(logkey.Path, path), zap.Error(err))
			if e != nil && e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.Type().IsRegular() && isTemp(e.Name()) {
			if err := os.Remove(path); err != nil {
				d.log.Warn("cannot remove a stale temporary file", zap.String(logkey.Path, path), zap.Error(err))
			} else {
				removed++
			}
		}
		return nil
	})
	if err != nil {
		d.log.Warn("cleaning stale temporary files stopped early", zap.String(logkey.Root, d.root), zap.Error(err))
	}
	if removed > 0 {
		d.log.Info("removed stale temporary files of interrupted commits", zap.String(logkey.Root, d.root), zap.Int(logkey.Files, removed))
	}
}

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpMarker)
}

func tempPrefix(id string) string { return "." + id + tmpMarker }

// Stat reads the footer of key's file: the batch and attempt it names.
func (d *diskStore) Stat(_ context.Context, key string) (FileStat, error) {
	f, err := os.Open(d.path(key))
	// ENOTDIR: a file stands where a folder of the path should be, so the
	// batch is not there; Put reports the obstacle when it makes folders.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return FileStat{}, nil
	}
	if err != nil {
		return FileStat{}, hint(err) // names the path
	}
	defer f.Close()
	r, err := file.NewParquetReader(f)
	if err != nil {
		return FileStat{Present: true}, nil
	}
	defer r.Close()
	st := FileStat{Present: true}
	kv := r.MetaData().KeyValueMetadata()
	if v := kv.FindValue(KeyBatchID); v != nil {
		st.BatchID = *v
	}
	if v := kv.FindValue(KeyAttempt); v != nil {
		st.Attempt = *v
	}
	return st, nil
}

// Put writes a temporary file beside key, syncs it, renames it into place
// and syncs the folders.
func (d *diskStore) Put(ctx context.Context, key string, o PutOptions, write func(io.Writer) (int64, error)) (int64, error) {
	final := d.path(key)
	dir := filepath.Dir(final)
	if err := d.mkdirs(dir); err != nil {
		return 0, err
	}
	d.removeTemps(dir, o.BatchID)
	tmp, n, err := d.writeTemp(ctx, dir, final, o.BatchID, write)
	if err != nil {
		return 0, err
	}
	if d.beforeRename != nil {
		d.beforeRename(tmp, final)
	}
	if err := ctx.Err(); err != nil {
		removeQuietly(tmp)
		return 0, fmt.Errorf("%w (nothing written to %s)", err, final)
	}
	if err := os.Rename(tmp, final); err != nil {
		removeQuietly(tmp)
		return 0, fmt.Errorf("rename %s to %s: %w", tmp, final, hint(err))
	}
	if d.afterRename != nil {
		d.afterRename(tmp, final)
	}
	// The file is visible now; syncing the folders makes the rename (and
	// the folders, new or made by an attempt that crashed) survive a power
	// cut. If that fails the caller retries, finds the file, and Keep
	// syncs again.
	if err := d.syncDirs(dir); err != nil {
		return n, err
	}
	return n, nil
}

// Keep syncs the folders of a file found in place: an attempt may have
// stopped after its rename, before syncing them.
func (d *diskStore) Keep(_ context.Context, key string) error {
	return d.syncDirs(filepath.Dir(d.path(key)))
}

// writeTemp encodes into a new hidden file in dir, syncs and closes it,
// and returns its path. On error nothing is left behind.
func (d *diskStore) writeTemp(ctx context.Context, dir, final, id string, write func(io.Writer) (int64, error)) (path string, n int64, err error) {
	f, err := createTemp(dir, tempPrefix(id))
	if err != nil {
		return "", 0, fmt.Errorf("create a temporary file in %s: %w", dir, hint(err))
	}
	path = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			removeQuietly(path)
		}
	}()
	bw := bufio.NewWriterSize(f, WriteBuffer)
	if n, err = write(bw); err != nil {
		return "", 0, fmt.Errorf("write %s: %w", final, hint(err))
	}
	if err := bw.Flush(); err != nil {
		return "", 0, fmt.Errorf("write %s: %w", final, hint(err))
	}
	// A cancelled commit skips the fsync, the slowest step.
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("%w (nothing written to %s)", err, final)
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("write %s: sync %s: %w", final, path, hint(err))
	}
	if err := f.Close(); err != nil {
		return "", 0, fmt.Errorf("write %s: close %s: %w", final, path, hint(err))
	}
	return path, n, nil
}

// createTemp creates a new file in dir named prefix and a random suffix,
// as os.CreateTemp does, but with mode 0666 less the umask, as os.Create
// gives: os.CreateTemp's 0600 survives the rename, and a reader running as
// another user (Spark, Trino, a colleague's DuckDB) was refused the file.
// The kernel applies the umask, so it is never read (syscall.Umask reads
// it only by setting it, racing with other goroutines' files).
func createTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// WriteBuffer is the buffer to write an encoded file through: it gathers
// the file's small writes (page headers, the footer's pieces), and a page
// larger than it goes to the file directly. It was 1 MiB: allocated and
// cleared for every file, most of a sparse form's file being a few
// kilobytes, it was the largest allocation of a first sync of many
// accounts, and the collector's work with it.
const WriteBuffer = 64 << 10

// Delete removes key's file and syncs its folders, so the removal lasts.
func (d *diskStore) Delete(_ context.Context, key string) error {
	p := d.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("remove %s: %w", p, hint(err))
	}
	if err := d.syncDirs(filepath.Dir(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Entries names what table's folder holds.
func (d *diskStore) Entries(_ context.Context, table string, n int) ([]string, error) {
	dir := d.path(table)
	entries, err := os.ReadDir(dir)
	// ENOTDIR: a file is in the way; making the folder reports it.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read table folder %s: %w", dir, hint(err))
	}
	names := make([]string, 0, min(n, len(entries)))
	for _, e := range entries[:min(n, len(entries))] {
		names = append(names, e.Name())
	}
	return names, nil
}

// Purge renames table's folder to a hidden name (readers then see no
// table at all, never a part of one), then removes it. A removal a crash
// interrupted is finished by the next Purge of the table.
func (d *diskStore) Purge(_ context.Context, table string) error {
	dir := d.path(table)
	hidden := filepath.Join(d.root, purgePrefix+table)
	if err := os.RemoveAll(hidden); err != nil {
		return fmt.Errorf("remove %s: %w", hidden, hint(err))
	}
	switch err := os.Rename(dir, hidden); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("move %s aside: %w", dir, hint(err))
	}
	if err := syncDir(d.root); err != nil {
		return fmt.Errorf("sync folder %s: %w", d.root, err)
	}
	if err := os.RemoveAll(hidden); err != nil {
		return fmt.Errorf("remove %s: %w", hidden, hint(err))
	}
	return nil
}

// List walks the folder under prefix, skipping hidden names: temporary
// files, and folders a purge moved aside.
func (d *diskStore) List(ctx context.Context, prefix string, fn func(key string) error) error {
	dir := d.path(strings.TrimSuffix(prefix, "/"))
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel))
	})
	if err != nil {
		return hint(err)
	}
	return nil
}

// Open opens key's file.
func (d *diskStore) Open(_ context.Context, key string) (ReadFile, error) {
	return os.Open(d.path(key))
}

// mkdirs makes the folders from the root down to dir.
func (d *diskStore) mkdirs(dir string) error {
	rel, err := filepath.Rel(d.root, dir)
	if err != nil {
		return err
	}
	cur := d.root
	for _, e := range strings.Split(rel, string(filepath.Separator)) {
		if e == "." || e == "" {
			continue
		}
		cur = filepath.Join(cur, e)
		// 0777 less the umask, as os.MkdirAll gives: readers of another
		// user need to list the partition folders.
		err := os.Mkdir(cur, 0o777)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrExist):
			if fi, serr := os.Stat(cur); serr != nil || !fi.IsDir() {
				return fmt.Errorf("create folder %s: something else is in the way: remove it or point sink.parquet.path elsewhere", cur)
			}
		default:
			return fmt.Errorf("create folder %s: %w", cur, hint(err))
		}
	}
	return nil
}

// syncDirs flushes the entries leading to a file in dir: dir's own, and
// each parent's up to the root.
func (d *diskStore) syncDirs(dir string) error {
	for cur := dir; ; cur = filepath.Dir(cur) {
		if err := syncDir(cur); err != nil {
			return fmt.Errorf("sync folder %s: %w", cur, hint(err))
		}
		if cur == d.root || !strings.HasPrefix(cur, d.root) {
			return nil
		}
	}
}

// removeTemps deletes leftovers of earlier attempts at batch id in dir.
func (d *diskStore) removeTemps(dir, id string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		d.log.Warn("cannot list a partition folder to clean temporary files", zap.String(logkey.Path, dir), zap.Error(err))
		return
	}
	prefix := tempPrefix(id)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil {
				d.log.Warn("cannot remove a stale temporary file", zap.String(logkey.Path, p), zap.Error(err))
			} else {
				d.log.Info("removed the temporary file of an interrupted commit", zap.String(logkey.Path, p), zap.String(logkey.BatchID, id))
			}
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func removeQuietly(path string) { _ = os.Remove(path) }

// hint adds to a file system error what a user can do about it.
func hint(err error) error {
	var fix string
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		fix = "free space or point sink.parquet.path elsewhere"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		fix = "give syncd write access to the folder or point sink.parquet.path elsewhere"
	case errors.Is(err, syscall.ENOTDIR):
		fix = "a file is in the way of a folder: remove it or point sink.parquet.path elsewhere"
	default:
		return err
	}
	return fmt.Errorf("%w: %s", err, fix)
}
