package parquetsink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/sink"
)

// tmpMarker sits in every temporary file name, after a leading "." that
// makes DuckDB, Spark and Hive skip the file.
const tmpMarker = ".parquet.tmp-"

// Options configures a Sink.
type Options struct {
	Root    string        // folder holding one sub-folder per table; created if missing
	Encode  EncodeOptions // compression and row group size
	Layout  Layout        // partition folders: day (default), month or none
	Version string        // written to the footer as syncd.version; "" uses the build info
	Logger  *zap.Logger   // nil logs nothing
}

// Sink commits each batch as one Parquet file per partition it touches,
// <root>/<table>/submission_date=YYYY-MM-DD/<batch id>.parquet (see Layout).
// A file is written under a hidden temporary name, synced, and renamed
// into place, so readers see each file whole or not at all; the batch is
// committed once every one of its files is.
type Sink struct {
	root   string
	enc    EncodeOptions
	layout Layout
	kv     map[string]string // footer extras; read-only after New
	log    *zap.Logger

	// locks serialises commits of one batch in this process, so that one
	// commit never cleans up another's temporary file.
	locks keyedMutex

	checkedMu sync.Mutex
	checked   map[string]bool // tables whose layout was checked

	// Test hooks, called around the rename of a commit.
	beforeRename func(tmp, final string)
	afterRename  func(tmp, final string)
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.Partitioner   = (*Sink)(nil)
	_ sink.Inventory     = (*Sink)(nil)
	_ sink.VersionReader = (*Sink)(nil)
)

// HeldBatches lists the ids of the batches table has files of, by their
// names (sink.Inventory).
func (s *Sink) HeldBatches(ctx context.Context, table string) ([]string, error) {
	return HeldBatchIDs(ctx, diskLister{s.root}, table)
}

// DescribeBatches reads the footers of table's files (sink.Inventory).
func (s *Sink) DescribeBatches(ctx context.Context, table string) ([]sink.Held, error) {
	return DescribeHeld(ctx, diskLister{s.root}, s.layout, table)
}

// ReadVersions reads the identity columns of the files of table's
// complete batches (sink.VersionReader).
func (s *Sink) ReadVersions(ctx context.Context, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	return ReadHeldVersions(ctx, diskLister{s.root}, s.layout, t, fn)
}

// New opens the sink at opts.Root, creating the folder if needed, and
// removes temporary files left behind by a crashed writer.
func New(opts Options) (*Sink, error) {
	if opts.Root == "" {
		return nil, errors.New("parquet sink: no folder given: set sink.parquet.path")
	}
	if err := opts.Encode.Validate(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: resolve %s: %w", opts.Root, err)
	}
	switch fi, err := os.Stat(root); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("parquet sink: create folder %s: %w", root, hint(err))
		}
	case err != nil:
		return nil, fmt.Errorf("parquet sink: open folder %s: %w", root, hint(err))
	case !fi.IsDir():
		return nil, fmt.Errorf("parquet sink: %s is not a folder: point sink.parquet.path at a folder", root)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	layout, err := ParseLayout(string(opts.Layout))
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	s := &Sink{root: root, enc: opts.Encode, layout: layout, log: log, checked: map[string]bool{}}
	if opts.Version != "" {
		s.kv = map[string]string{KeyVersion: opts.Version}
	}
	s.cleanStale()
	return s, nil
}

// cleanStale removes every temporary file under the root. They are
// invisible to readers, so this only frees space; failures are logged.
func (s *Sink) cleanStale() {
	removed := 0
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			s.log.Warn("cannot read a folder while cleaning temporary files", zap.String("path", path), zap.Error(err))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && isTemp(d.Name()) {
			if err := os.Remove(path); err != nil {
				s.log.Warn("cannot remove a stale temporary file", zap.String("path", path), zap.Error(err))
			} else {
				removed++
			}
		}
		return nil
	})
	if err != nil {
		s.log.Warn("cleaning stale temporary files stopped early", zap.String("root", s.root), zap.Error(err))
	}
	if removed > 0 {
		s.log.Info("removed stale temporary files of interrupted commits", zap.String("root", s.root), zap.Int("files", removed))
	}
}

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpMarker)
}

func tempPrefix(id string) string { return "." + id + tmpMarker }

// Path returns where the file of batch b's partition part lives once
// committed.
func (s *Sink) Path(b sink.Batch, part string) string {
	return filepath.Join(s.partition(b, part), b.ID+".parquet")
}

// partition is the folder of one partition of b's table.
func (s *Sink) partition(b sink.Batch, part string) string {
	return filepath.Join(s.root, b.Table, s.layout.Dir(Prefix(b.TimeColumn), part))
}

// PartitionOf names the partition of a row whose time is t.
func (s *Sink) PartitionOf(t time.Time) string { return s.layout.PartitionOf(t) }

// PartitionStart is the first instant of the partition holding t.
func (s *Sink) PartitionStart(t time.Time) time.Time { return s.layout.PartitionStart(t) }

// Commit writes rec as batch b: one file per partition its rows fall in.
// A file already in place whose footer names b is kept: the rows are never
// written twice. A final-named file that is unreadable, or names another
// batch, is replaced. Cancelling ctx stops the commit of the file being
// written up to its rename; the files renamed stay, and a replay keeps them.
func (s *Sink) Commit(ctx context.Context, b sink.Batch, rec arrow.Record) error {
	_, err := s.CommitSized(ctx, b, rec)
	return err
}

// CommitSized is Commit that also reports the bytes of the batch's files,
// for the bytes-written metric.
func (s *Sink) CommitSized(ctx context.Context, b sink.Batch, rec arrow.Record) (int64, error) {
	if rec == nil {
		return 0, fmt.Errorf("commit batch %s: no record", b.ID)
	}
	b, parts, err := s.layout.Split(b, rec)
	if err != nil {
		return 0, err
	}
	if len(parts) == 0 {
		// A batch without rows still leaves its mark, so that Committed
		// and replays agree on it.
		part := s.layout.PartitionOf(b.WindowStart)
		b.Parts = []string{part}
		parts = []sink.Part{{Key: part, Records: sink.Records{Schema: rec.Schema(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}}}
	}
	return s.CommitParts(ctx, b, parts)
}

// CommitParts writes each part of batch b as one file, in order
// (sink.Partitioner). Memory holds one chunk and one row group, whatever the
// batch's size. It reports the bytes of the batch's files.
func (s *Sink) CommitParts(ctx context.Context, b sink.Batch, parts []sink.Part) (int64, error) {
	if err := validate(b); err != nil {
		return 0, err
	}
	if err := checkParts(b, parts); err != nil {
		return 0, err
	}
	if err := s.checkLayout(b); err != nil {
		return 0, err
	}
	unlock, err := s.locks.lock(ctx, b.ID)
	if err != nil {
		return 0, fmt.Errorf("commit batch %s: wait for another commit of it: %w", b.ID, err)
	}
	defer unlock()
	var written int64
	for _, p := range parts {
		if err := s.commitPart(ctx, b, p); err != nil {
			return written, err
		}
		written += s.size(s.Path(b, p.Key))
	}
	for _, part := range b.Stale {
		if err := os.Remove(s.Path(b, part)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return written, fmt.Errorf("commit batch %s: remove the file an earlier attempt wrote in %s: %w", b.ID, part, hint(err))
		}
		if err := s.syncDirs(b, part); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return written, fmt.Errorf("commit batch %s: %w", b.ID, err)
		}
	}
	return written, nil
}

// checkLayout refuses, once per table and process, a table folder written
// with another layout.
func (s *Sink) checkLayout(b sink.Batch) error {
	table := b.Table
	s.checkedMu.Lock()
	defer s.checkedMu.Unlock()
	if s.checked[table] {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(s.root, table))
	// ENOTDIR: a file is in the way; making the folder reports it.
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("read table folder %s: %w", filepath.Join(s.root, table), hint(err))
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if err := s.layout.CheckTable(table, Prefix(b.TimeColumn), names); err != nil {
		return err
	}
	s.checked[table] = true
	return nil
}

// commitPart is the protocol of one file: skip it if in place, else write
// a temporary file, sync it, rename it into place and sync the folders.
func (s *Sink) commitPart(ctx context.Context, b sink.Batch, p sink.Part) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit batch %s: %w", b.ID, err)
	}
	dir, final := s.partition(b, p.Key), s.Path(b, p.Key)
	ok, err := s.holds(final, b)
	switch {
	case err != nil:
		return fmt.Errorf("commit batch %s: %w", b.ID, err)
	case ok && b.Replace:
		// An attempt that never committed wrote it: this attempt's rows
		// replace it (the rename below is atomic).
	case ok:
		// An earlier attempt may have died after its rename but before
		// syncing the folders; finish that part so the file lasts.
		if err := s.syncDirs(b, p.Key); err != nil {
			return fmt.Errorf("commit batch %s: %w", b.ID, err)
		}
		s.log.Debug("batch file already committed", zap.String("batch_id", b.ID), zap.String("path", final))
		return nil
	}
	if err := s.mkdirs(b, p.Key); err != nil {
		return fmt.Errorf("commit batch %s: %w", b.ID, err)
	}
	s.removeTemps(dir, b.ID)

	tmp, err := s.writeTemp(ctx, dir, final, b, func(w io.Writer) (int64, error) {
		return EncodeRecords(w, p.Records, b, s.kv, s.enc)
	})
	if err != nil {
		return err
	}
	if s.beforeRename != nil {
		s.beforeRename(tmp, final)
	}
	if err := ctx.Err(); err != nil {
		removeQuietly(tmp)
		return fmt.Errorf("commit batch %s: %w (nothing written to %s)", b.ID, err, final)
	}
	if err := os.Rename(tmp, final); err != nil {
		removeQuietly(tmp)
		return fmt.Errorf("commit batch %s: rename %s to %s: %w", b.ID, tmp, final, hint(err))
	}
	if s.afterRename != nil {
		s.afterRename(tmp, final)
	}
	// The file is visible now; syncing the folders makes the rename (and
	// the folders, new or made by an attempt that crashed) survive a power
	// cut. If that fails the caller retries, finds the file, and syncs again.
	if err := s.syncDirs(b, p.Key); err != nil {
		return fmt.Errorf("commit batch %s: %w", b.ID, err)
	}
	s.log.Debug("batch file committed", zap.String("batch_id", b.ID), zap.String("path", final), zap.Int64("rows", p.Records.Rows))
	return nil
}

// size is the size of a committed file; 0 when it cannot be read (the
// batch is committed, only the figure is missing).
func (s *Sink) size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// writeTemp encodes the batch into a new hidden file in dir, syncs and closes it,
// and returns its path. On error nothing is left behind.
func (s *Sink) writeTemp(ctx context.Context, dir, final string, b sink.Batch, encode func(io.Writer) (int64, error)) (path string, err error) {
	f, err := os.CreateTemp(dir, tempPrefix(b.ID)+"*")
	if err != nil {
		return "", fmt.Errorf("commit batch %s: create a temporary file in %s: %w", b.ID, dir, hint(err))
	}
	path = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			removeQuietly(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := encode(bw); err != nil {
		return "", fmt.Errorf("write batch %s to %s: %w", b.ID, final, hint(err))
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("write batch %s to %s: %w", b.ID, final, hint(err))
	}
	// A cancelled commit skips the fsync, the slowest step.
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("commit batch %s: %w (nothing written to %s)", b.ID, err, final)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("write batch %s to %s: sync %s: %w", b.ID, final, path, hint(err))
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write batch %s to %s: close %s: %w", b.ID, final, path, hint(err))
	}
	return path, nil
}

// Committed reports whether every file of batch b (one per partition of
// b.Parts) is in place under its final name with a readable footer naming b.
func (s *Sink) Committed(ctx context.Context, b sink.Batch) (bool, error) {
	if err := validate(b); err != nil {
		return false, err
	}
	for _, part := range s.layout.PartsOf(b) {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("check batch %s: %w", b.ID, err)
		}
		ok, err := s.holds(s.Path(b, part), b)
		if err != nil {
			return false, fmt.Errorf("check batch %s: %w", b.ID, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// holds reports whether path is a complete Parquet file of batch b. A
// missing file is false; an unreadable or foreign one is false and logged,
// so that a commit replaces it; only failing to open it is an error.
func (s *Sink) holds(path string, b sink.Batch) (bool, error) {
	f, err := os.Open(path)
	// ENOTDIR: a file stands where a folder of the path should be, so the
	// batch is not there; Commit reports the obstacle when it makes folders.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, hint(err) // names the path
	}
	defer f.Close()
	r, err := file.NewParquetReader(f)
	if err != nil {
		s.log.Warn("a batch file is unreadable; committing the batch replaces it", zap.String("path", path), zap.String("batch_id", b.ID), zap.Error(err))
		return false, nil
	}
	defer r.Close()
	if got := r.MetaData().KeyValueMetadata().FindValue(KeyBatchID); got == nil || *got != b.ID {
		found := "<none>"
		if got != nil {
			found = *got
		}
		s.log.Warn("a batch file's footer names another batch; committing the batch replaces it", zap.String("path", path), zap.String("batch_id", b.ID), zap.String("footer_batch_id", found))
		return false, nil
	}
	if b.Attempt != "" {
		if got := r.MetaData().KeyValueMetadata().FindValue(KeyAttempt); got == nil || *got != b.Attempt {
			// A stopped attempt of the batch wrote it: not part of this one.
			return false, nil
		}
	}
	return true, nil
}

// mkdirs makes the table folder and the partition's.
func (s *Sink) mkdirs(b sink.Batch, part string) error {
	dirs := []string{filepath.Join(s.root, b.Table)}
	if s.layout.Dir(Prefix(b.TimeColumn), part) != "" {
		dirs = append(dirs, s.partition(b, part))
	}
	for _, d := range dirs {
		err := os.Mkdir(d, 0o755)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrExist):
			if fi, serr := os.Stat(d); serr != nil || !fi.IsDir() {
				return fmt.Errorf("create folder %s: something else is in the way: remove it or point sink.parquet.path elsewhere", d)
			}
		default:
			return fmt.Errorf("create folder %s: %w", d, hint(err))
		}
	}
	return nil
}

// syncDirs flushes the entries leading to a partition's file: the file's
// own in the partition folder, the partition's in the table folder, the
// table's in the root.
func (s *Sink) syncDirs(b sink.Batch, part string) error {
	dirs := []string{filepath.Join(s.root, b.Table), s.root}
	if s.layout.Dir(Prefix(b.TimeColumn), part) != "" {
		dirs = append([]string{s.partition(b, part)}, dirs...)
	}
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("sync folder %s: %w", d, hint(err))
		}
	}
	return nil
}

// removeTemps deletes leftovers of earlier attempts at batch id in dir.
func (s *Sink) removeTemps(dir, id string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.log.Warn("cannot list a partition folder to clean temporary files", zap.String("path", dir), zap.Error(err))
		return
	}
	prefix := tempPrefix(id)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil {
				s.log.Warn("cannot remove a stale temporary file", zap.String("path", p), zap.Error(err))
			} else {
				s.log.Info("removed the temporary file of an interrupted commit", zap.String("path", p), zap.String("batch_id", id))
			}
		}
	}
}

// Close releases nothing: every commit closes its own files.
func (s *Sink) Close() error { return nil }

// validate refuses batches that would land somewhere unexpected: hidden
// from readers, outside the root, or in the wrong partition.
func validate(b sink.Batch) error {
	if err := safeName("batch id", b.ID); err != nil {
		return err
	}
	if err := safeName("table name", b.Table); err != nil {
		return fmt.Errorf("batch %s: %w", b.ID, err)
	}
	if strings.Contains(b.Table, "=") {
		return fmt.Errorf("batch %s: table name %q contains '=', which readers take for a Hive partition", b.ID, b.Table)
	}
	if !b.WindowStart.Before(b.WindowEnd) {
		return fmt.Errorf("batch %s: window [%s, %s) is empty", b.ID, formatTime(b.WindowStart), formatTime(b.WindowEnd))
	}
	for _, p := range b.Parts {
		if p == "" {
			continue // LayoutNone
		}
		if err := safeName("partition", p); err != nil {
			return fmt.Errorf("batch %s: %w", b.ID, err)
		}
	}
	return nil
}

// safeName accepts what can be one path element that readers do not skip.
func safeName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > 200:
		return fmt.Errorf("%s %.40q... is longer than 200 bytes, too long for a file name", what, s)
	case strings.ContainsAny(s, `/\`) || strings.Contains(s, ".."):
		return fmt.Errorf("%s %q contains a path separator or '..'", what, s)
	case s[0] == '.' || s[0] == '_':
		return fmt.Errorf("%s %q starts with '.' or '_', which readers treat as a hidden file", what, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s %q contains a control character", what, s)
		}
	}
	return nil
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

// keyedMutex is a set of locks created on demand, one per key.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sem  chan struct{} // a lock that a waiter can give up on
	refs int
}

// lock locks key, waiting no longer than ctx allows, and returns its
// unlock. Keys nobody holds or waits for are forgotten.
func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*keyedLock)
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{sem: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	release := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// purgePrefix starts the hidden name a table's folder is moved to while
// Purge removes it, so readers see the whole table or none of it.
const purgePrefix = ".purge-"

// Purge removes table's whole folder: it is first renamed to a hidden name
// (readers then see no table at all, never a part of one), then removed. A
// removal a crash interrupted is finished by the next Purge of the table.
func (s *Sink) Purge(_ context.Context, table string) error {
	if table == "" || strings.ContainsAny(table, `/\`) || strings.HasPrefix(table, ".") {
		return fmt.Errorf("purge table %q: not a table name", table)
	}
	dir := filepath.Join(s.root, table)
	hidden := filepath.Join(s.root, purgePrefix+table)
	if err := os.RemoveAll(hidden); err != nil {
		return fmt.Errorf("purge table %s: remove %s: %w", table, hidden, hint(err))
	}
	switch err := os.Rename(dir, hidden); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("purge table %s: move %s aside: %w", table, dir, hint(err))
	}
	if err := syncDir(s.root); err != nil {
		return fmt.Errorf("purge table %s: %w", table, err)
	}
	if err := os.RemoveAll(hidden); err != nil {
		return fmt.Errorf("purge table %s: remove %s: %w", table, hidden, hint(err))
	}
	return nil
}
