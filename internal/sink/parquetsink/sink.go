package parquetsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/sink"
)

// Options configures a Sink on local disk.
type Options struct {
	Root    string        // folder holding one sub-folder per table; created if missing
	Encode  EncodeOptions // compression and row group size
	Layout  Layout        // partition folders of a batch that names none (Batch.Layout): day (default), month, year or none
	Version string        // written to the footer as syncd.version; "" uses the build info
	Logger  *zap.Logger   // nil logs nothing
	// KeepTemp leaves temporary files in the folder alone: a sink opened
	// to be probed (validate) while a daemon writes there must not take
	// the daemon's files being written for a crashed writer's.
	KeepTemp bool
}

// Settings configures a Sink over any Storage (see NewOn).
type Settings struct {
	Encode  EncodeOptions // compression and row group size
	Layout  Layout        // partition folders of a batch that names none (Batch.Layout): day (default), month, year or none
	Version string        // written to the footer as syncd.version; "" uses the build info
	Logger  *zap.Logger   // nil logs nothing
}

// Sink commits each batch as one Parquet file per partition it touches,
// <table>/submission_date=YYYY-MM-DD/<batch id>.parquet (see Layout), in a
// Storage that makes each file visible whole or not at all; the batch is
// committed once every one of its files is in place, written by its
// attempt.
type Sink struct {
	st     Storage
	disk   *diskStore // st, when it is a folder (tests reach its hooks)
	enc    EncodeOptions
	layout Layout
	kv     map[string]string // footer extras; read-only after NewOn
	log    *zap.Logger

	// locks serialises commits of one batch in this process, so that one
	// commit never cleans up another's temporary file.
	locks keyedMutex

	checkedMu sync.Mutex
	checked   map[string]Layout // tables whose layout was checked, and that layout
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.Partitioner   = (*Sink)(nil)
	_ sink.Purger        = (*Sink)(nil)
	_ sink.Inventory     = (*Sink)(nil)
	_ sink.VersionReader = (*Sink)(nil)
	_ sink.LayoutFinder  = (*Sink)(nil)
	_ sink.Prober        = (*Sink)(nil)
)

// StorageProber is a capability a Storage may have: proving it can be
// written, by writing and deleting a hidden probe; it says what it did.
type StorageProber interface {
	Probe(ctx context.Context) (string, error)
}

// Probe proves the output can be written (sink.Prober), by its storage's
// probe; a storage without one is taken as writable.
func (s *Sink) Probe(ctx context.Context) (sink.Probe, error) {
	p, ok := s.st.(StorageProber)
	if !ok {
		return sink.Probe{}, nil
	}
	what, err := p.Probe(ctx)
	return sink.Probe{Checked: what}, err
}

// New opens the sink at opts.Root, creating the folder if needed, and
// removes temporary files left behind by a crashed writer.
func New(opts Options) (*Sink, error) {
	d, err := openDisk(opts.Root, opts.Logger, opts.KeepTemp)
	if err != nil {
		return nil, err
	}
	s, err := NewOn(d, Settings{Encode: opts.Encode, Layout: opts.Layout, Version: opts.Version, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	s.disk = d
	return s, nil
}

// NewOn opens a sink over st, which it closes on Close.
func NewOn(st Storage, set Settings) (*Sink, error) {
	if err := set.Encode.Validate(); err != nil {
		return nil, err
	}
	layout, err := ParseLayout(string(set.Layout))
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	log := set.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Sink{st: st, enc: set.Encode, layout: layout, log: log, checked: map[string]Layout{}}
	if set.Version != "" {
		s.kv = map[string]string{KeyVersion: set.Version}
	}
	return s, nil
}

// Key is where the file of batch b's partition part lives, relative to
// the storage's root.
func (s *Sink) Key(b sink.Batch, part string) string {
	return s.layoutOf(b).RelPath(b.Table, Prefix(b.TimeColumn), part, b.ID)
}

// layoutOf is the layout batch b is written in: its table's, or the
// sink's default for a batch that names none.
func (s *Sink) layoutOf(b sink.Batch) Layout {
	if b.Layout != "" {
		return Layout(b.Layout)
	}
	return s.layout
}

// TableLayout is the layout table's files were written with, from the
// names in its folder; "" when it holds none (sink.LayoutFinder).
func (s *Sink) TableLayout(ctx context.Context, table, timeColumn string) (sink.Layout, error) {
	names, err := s.st.Entries(ctx, table, 100)
	if err != nil {
		return "", fmt.Errorf("read the layout of table %s: %w", table, err)
	}
	return sink.Layout(layoutOf(Prefix(timeColumn), names)), nil
}

// Commit writes parts as batch b: one file per partition, each written as
// its part streams in, so memory holds one chunk and one row group
// whatever the batch's size; then it removes the files of b.Stale. A batch
// that comes whole (one Whole part) is cut here by its time column. A file
// already in place that b's attempt wrote is kept: the rows are never
// written twice. A file that is unreadable, names another batch or another
// attempt is replaced. Cancelling ctx stops the commit of the file being
// written before it becomes visible; the files in place stay, and a replay
// keeps them. It reports the bytes written.
func (s *Sink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	if len(parts) > 0 && parts[0].Whole {
		if len(parts) > 1 {
			return 0, fmt.Errorf("commit batch %s: %d parts, the first the whole batch", b.ID, len(parts))
		}
		whole := parts[0].Records
		layout := s.layoutOf(b)
		var err error
		if b, parts, err = layout.Cut(b, whole); err != nil {
			return 0, err
		}
		if len(parts) == 0 {
			// A batch without rows still leaves its mark, so that Committed
			// and replays agree on it.
			part := layout.PartitionOf(b.WindowStart)
			b.Parts = []string{part}
			parts = sink.Parts{{Key: part, Records: whole}}
		}
	}
	if err := validate(b); err != nil {
		return 0, err
	}
	if err := checkParts(b, parts); err != nil {
		return 0, err
	}
	if err := s.checkLayout(ctx, b); err != nil {
		return 0, err
	}
	unlock, err := s.locks.lock(ctx, b.ID)
	if err != nil {
		return 0, fmt.Errorf("commit batch %s: wait for another commit of it: %w", b.ID, err)
	}
	defer unlock()
	var written int64
	for _, p := range parts {
		n, err := s.commitPart(ctx, b, p)
		written += n
		if err != nil {
			return written, err
		}
	}
	for _, part := range b.Stale {
		if err := s.st.Delete(ctx, s.Key(b, part)); err != nil {
			return written, fmt.Errorf("commit batch %s: remove the file an earlier attempt wrote in %s: %w", b.ID, part, err)
		}
	}
	return written, nil
}

// WritesFilePerPartition marks the sink.Partitioner capability.
func (s *Sink) WritesFilePerPartition() {}

// checkLayout refuses, once per table and process, a table written with
// another layout.
func (s *Sink) checkLayout(ctx context.Context, b sink.Batch) error {
	table, layout := b.Table, s.layoutOf(b)
	s.checkedMu.Lock()
	defer s.checkedMu.Unlock()
	if l, ok := s.checked[table]; ok && l == layout {
		return nil
	}
	names, err := s.st.Entries(ctx, table, 100)
	if err != nil {
		return fmt.Errorf("check the layout of table %s: %w", table, err)
	}
	if err := layout.CheckTable(table, Prefix(b.TimeColumn), names); err != nil {
		return err
	}
	s.checked[table] = layout
	return nil
}

// maxPutTries bounds how often one file is looked at and put again when
// it changed in between.
const maxPutTries = 3

// commitPart is the protocol of one file: keep it if b's attempt wrote it
// (unless b.Replace: then it is rewritten), else put it on the condition
// that what is in place is still what was looked at: absent, or the same
// version. So a commit of a writer that died after sending it, which the
// service completes later, never lands over a newer attempt's file (its
// condition names what it saw, which is gone); and a file that changed in
// between is looked at again.
func (s *Sink) commitPart(ctx context.Context, b sink.Batch, p sink.Part) (int64, error) {
	key := s.Key(b, p.Key)
	for try := 1; ; try++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, err)
		}
		st, err := s.st.Stat(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, err)
		}
		// A file b's attempt wrote is kept, except by a first try that
		// rewrites: with b.Replace, an attempt that never committed wrote
		// what is in place, and this attempt's rows replace it.
		if s.ours(key, st, b) && (!b.Replace || try > 1) {
			if err := s.st.Keep(ctx, key); err != nil {
				return 0, fmt.Errorf("commit batch %s: %w", b.ID, err)
			}
			s.log.Debug("batch file already committed", zap.String(logkey.BatchID, b.ID), zap.String(logkey.Key, key))
			return 0, nil
		}
		// Present and not ours: a stopped attempt's, or not a file of the
		// batch at all: replaced.
		o := PutOptions{BatchID: b.ID, Attempt: b.Attempt, IfAbsent: !st.Present, IfVersion: st.Version}
		n, err := s.st.Put(ctx, key, o, func(w io.Writer) (int64, error) {
			return EncodePart(w, p.Records, b, p.Key, s.kv, s.enc)
		})
		if errors.Is(err, ErrChanged) && try < maxPutTries {
			// Another writer, or a dead one's commit completed late,
			// changed the file: look again.
			s.log.Info("a batch file changed while it was written; looking again", zap.String(logkey.BatchID, b.ID), zap.String(logkey.Key, key), zap.Error(err))
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, err)
		}
		s.log.Debug("batch file committed", zap.String(logkey.BatchID, b.ID), zap.String(logkey.Key, key), zap.Int64(logkey.Rows, p.Records.Rows), zap.Int64(logkey.Bytes, n))
		return n, nil
	}
}

// Committed reports whether every file of batch b (one per partition of
// b.Parts) is in place, naming b and written by b's attempt.
func (s *Sink) Committed(ctx context.Context, b sink.Batch) (bool, error) {
	if err := validate(b); err != nil {
		return false, err
	}
	for _, part := range s.layoutOf(b).PartsOf(b) {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("check batch %s: %w", b.ID, err)
		}
		key := s.Key(b, part)
		st, err := s.st.Stat(ctx, key)
		if err != nil {
			return false, fmt.Errorf("check batch %s: %w", b.ID, err)
		}
		if !s.ours(key, st, b) {
			return false, nil
		}
	}
	return true, nil
}

// ours reports whether st, the file at key, is a file of batch b written
// by b's attempt (when b names one). A file that names another batch, or
// none, is logged: a commit replaces it.
func (s *Sink) ours(key string, st FileStat, b sink.Batch) bool {
	if !st.Present {
		return false
	}
	if st.BatchID != b.ID {
		found := st.BatchID
		if found == "" {
			found = "<unreadable>"
		}
		s.log.Warn("a batch file is unreadable or names another batch; committing the batch replaces it", zap.String(logkey.Key, key), zap.String(logkey.BatchID, b.ID), zap.String(logkey.FoundBatchID, found))
		return false
	}
	// A file of a stopped attempt of the batch is not part of this one.
	return b.Attempt == "" || st.Attempt == b.Attempt
}

// Close closes the storage.
func (s *Sink) Close() error { return s.st.Close() }

// Purge removes table's whole output (sink.Purger). A purge a crash
// interrupted is finished by the next one.
func (s *Sink) Purge(ctx context.Context, table string) error {
	if table == "" || strings.ContainsAny(table, `/\`) || strings.HasPrefix(table, ".") {
		return fmt.Errorf("purge table %q: not a table name", table)
	}
	if err := s.st.Purge(ctx, table); err != nil {
		return fmt.Errorf("purge table %s in %s: %w", table, s.st, err)
	}
	s.checkedMu.Lock()
	delete(s.checked, table)
	s.checkedMu.Unlock()
	return nil
}

// HeldBatches lists the ids of the batches table has files of, by their
// names (sink.Inventory).
func (s *Sink) HeldBatches(ctx context.Context, table string) ([]string, error) {
	return heldBatchIDs(ctx, s.st, table)
}

// DescribeBatches reads the footers of table's files (sink.Inventory).
func (s *Sink) DescribeBatches(ctx context.Context, table string) ([]sink.Held, error) {
	held, _, err := describe(ctx, s.st, table)
	return held, err
}

// ReadVersions reads the identity columns of the files of table's
// complete batches, those columns only (sink.VersionReader).
func (s *Sink) ReadVersions(ctx context.Context, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	return readHeldVersions(ctx, s.st, t, fn)
}

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
