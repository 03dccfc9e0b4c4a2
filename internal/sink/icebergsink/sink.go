// Package icebergsink commits batches to Apache Iceberg tables through a
// catalog (SQL on sqlite or PostgreSQL, or REST), exactly once: a batch's
// data files are named from its batch id and added in one snapshot whose
// summary carries the id, and the table's properties keep the ids of its
// last batches, so that a batch is found in the table after any stop,
// even once maintenance has expired its snapshot.
//
// Each stream has two tables: <table> keeps every version and tombstone,
// as the Parquet output does; <table>_latest keeps one row per live
// record, each batch's changes committed as a row delta (equality deletes
// on the key, and the batch's newest version of each record). The
// versions table is the truth: the latest table follows it, and a batch
// that reached one but not the other is carried over from the versions
// table's own rows.
package icebergsink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/sink"
)

// Keys syncd writes into snapshot summaries and table properties, all
// under syncd. so that none overwrites one of Iceberg's own.
const (
	SummaryBatchID     = "syncd.batch-id"
	SummaryStream      = "syncd.stream"
	SummaryWindowStart = "syncd.window-start"
	SummaryWindowEnd   = "syncd.window-end"
	SummaryVersion     = "syncd.version"
	// PropRecentBatches lists the ids of the table's last batches, newest
	// last: the watermark that outlives the snapshots maintenance expires.
	PropRecentBatches = "syncd.recent-batches"
	// PropTimeFirst and PropTimeLast bound the time column of the rows the
	// table holds: with its row count, the table's density, which chooses
	// its partition spec.
	PropTimeFirst = "syncd.time-first"
	PropTimeLast  = "syncd.time-last"
	// PropFollows names, on a latest table, the versions table it follows.
	PropFollows = "syncd.follows"
)

// recentKept is how many batch ids a table's properties keep: an open
// batch is always one of a stream's last few.
const recentKept = 32

// LatestSuffix ends the name of a stream's current-state table.
const LatestSuffix = "_latest"

// Options configure a Sink.
type Options struct {
	// Catalog holds the tables; the sink closes it when CloseCatalog.
	Catalog      *Catalog
	CloseCatalog bool
	// Namespace is the account's namespace (one level: every engine
	// reads one-level namespaces).
	Namespace string
	// TargetFileSize is the size a data file is cut at; 0: 128 MiB.
	TargetFileSize int64
	// PartitionTarget is the number of rows a partition should hold at
	// least (sink.ChooseLayout); 0: 50,000, the engine's batch size.
	PartitionTarget int
	// MaxAttempts bounds the tries of one commit against conflicts (another
	// writer, a maintenance job) and lost answers; 0: 8.
	MaxAttempts int
	// MaintainEvery is how often a stream's tables are maintained after
	// its passes (MaintainIfDue); 0: an hour; negative: never (only
	// `syncd compact`). ExpireAfter and KeepSnapshots bound the history
	// kept (0: MaintainOptions' defaults).
	MaintainEvery time.Duration
	ExpireAfter   time.Duration
	KeepSnapshots int
	Version       string
	Logger        *zap.Logger
}

// Sink writes Iceberg tables.
type Sink struct {
	opts Options
	cat  catalog.Catalog
	log  *zap.Logger

	nsMu    sync.Mutex
	nsReady bool

	stopMu sync.Mutex
	stop   <-chan struct{}

	// beforeCompactCommit, when set (tests), runs between a compaction's
	// plan and its commit.
	beforeCompactCommit func(table string)
}

var (
	_ sink.Sink       = (*Sink)(nil)
	_ sink.Purger     = (*Sink)(nil)
	_ sink.LeaseBound = (*Sink)(nil)
)

// New opens a sink on opts.Catalog.
func New(opts Options) (*Sink, error) {
	if opts.Catalog == nil {
		return nil, errors.New("open the Iceberg sink: no catalog")
	}
	if opts.Namespace == "" {
		return nil, errors.New("open the Iceberg sink: no namespace")
	}
	if opts.TargetFileSize <= 0 {
		opts.TargetFileSize = 128 << 20
	}
	if opts.PartitionTarget <= 0 {
		opts.PartitionTarget = 50000
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Sink{opts: opts, cat: opts.Catalog.Catalog, log: opts.Logger}, nil
}

// Close closes the catalog if the sink owns it.
func (s *Sink) Close() error {
	if s.opts.CloseCatalog {
		return s.opts.Catalog.Close()
	}
	return nil
}

// StopWhen makes the sink refuse to commit once ch is closed (the state's
// lease was lost).
func (s *Sink) StopWhen(ch <-chan struct{}) {
	s.stopMu.Lock()
	s.stop = ch
	s.stopMu.Unlock()
}

func (s *Sink) stopped() error {
	s.stopMu.Lock()
	ch := s.stop
	s.stopMu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return errors.New("the state's lease was lost: this syncd no longer commits")
	default:
		return nil
	}
}

// Ident is the identifier of a table of the sink's namespace.
func (s *Sink) Ident(name string) table.Identifier {
	return table.Identifier{s.opts.Namespace, name}
}

// Namespace is the sink's namespace.
func (s *Sink) Namespace() string { return s.opts.Namespace }

// Catalog is the catalog the sink commits through.
func (s *Sink) Catalog() catalog.Catalog { return s.cat }

// Commit adds batch b to the stream's versions table and, for a stream
// with a key, its changes to the latest table; each commit is skipped
// when the table already holds the batch.
func (s *Sink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	if len(parts) == 0 {
		// A batch fetched again with no rows: an attempt that never
		// committed left nothing a reader sees (the catalog commit is
		// what makes files visible), so there is nothing to remove.
		return 0, nil
	}
	recs := parts.Records()
	if recs.Schema == nil {
		return 0, fmt.Errorf("commit batch %s: no schema", b.ID)
	}
	if err := s.ensureNamespace(ctx); err != nil {
		return 0, err
	}
	vt, err := s.loadOrCreate(ctx, b.Table, recs.Schema, b, false)
	if err != nil {
		return 0, err
	}
	if b.KeyColumn != "" {
		// A batch that reached the versions table in a run that stopped
		// before its latest-table commit is carried over first, so that
		// the latest table applies batches in the order they came; so is
		// b itself when the versions table holds it (from its rows there,
		// never from these, which may be of another fetch).
		if err := s.catchUp(ctx, vt, b); err != nil {
			return 0, err
		}
	}
	if Holds(vt, b.ID) {
		return 0, nil
	}
	written, vt, err := s.commitVersions(ctx, vt, b, recs)
	if err != nil {
		return written, err
	}
	if b.KeyColumn != "" {
		n, err := s.commitLatest(ctx, vt, b)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// Committed reports whether the versions table holds batch b. When it
// does and the latest table does not (a stop between the two commits),
// the batch's rows are carried over from the versions table now: the
// engine records the batch as committed and never sends it again.
func (s *Sink) Committed(ctx context.Context, b sink.Batch) (bool, error) {
	vt, err := s.load(ctx, b.Table)
	if err != nil || vt == nil {
		return false, err
	}
	if !Holds(vt, b.ID) {
		return false, nil
	}
	if b.KeyColumn != "" {
		if err := s.catchUpBatch(ctx, vt, b, b.ID); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Purge drops a stream's tables and removes their files.
func (s *Sink) Purge(ctx context.Context, name string) error {
	for _, n := range []string{name, name + LatestSuffix} {
		t, err := s.load(ctx, n)
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		if err := s.cat.DropTable(ctx, s.Ident(n)); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			return fmt.Errorf("drop Iceberg table %s: %w", n, err)
		}
		if err := removeTableFiles(ctx, t); err != nil {
			return fmt.Errorf("remove the files of Iceberg table %s: %w", n, err)
		}
	}
	return nil
}

// Holds reports whether table t holds batch id: its properties name it
// among the last batches, or a snapshot still kept carries it.
func Holds(t *table.Table, id string) bool {
	if slices.Contains(recentBatches(t.Properties()), id) {
		return true
	}
	for _, sn := range t.Metadata().Snapshots() {
		if sn.Summary != nil && sn.Summary.Properties[SummaryBatchID] == id {
			return true
		}
	}
	return false
}

func recentBatches(p iceberg.Properties) []string {
	v := p[PropRecentBatches]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// withRecent is the recent-batches property with id added.
func withRecent(p iceberg.Properties, id string) string {
	ids := recentBatches(p)
	ids = slices.DeleteFunc(ids, func(s string) bool { return s == id })
	ids = append(ids, id)
	if len(ids) > recentKept {
		ids = ids[len(ids)-recentKept:]
	}
	return strings.Join(ids, ",")
}

func (s *Sink) ensureNamespace(ctx context.Context) error {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if s.nsReady {
		return nil
	}
	ns := table.Identifier{s.opts.Namespace}
	ok, err := s.cat.CheckNamespaceExists(ctx, ns)
	if err != nil {
		return fmt.Errorf("look up Iceberg namespace %s: %w", s.opts.Namespace, err)
	}
	if !ok {
		err := s.cat.CreateNamespace(ctx, ns, iceberg.Properties{"comment": "written by syncd"})
		if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return fmt.Errorf("create Iceberg namespace %s: %w", s.opts.Namespace, err)
		}
	}
	s.nsReady = true
	return nil
}

// load loads a table; nil when it does not exist.
func (s *Sink) load(ctx context.Context, name string) (*table.Table, error) {
	t, err := s.cat.LoadTable(ctx, s.Ident(name))
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load Iceberg table %s.%s: %w", s.opts.Namespace, name, err)
	}
	return t, nil
}

// retry runs try until it succeeds, up to MaxAttempts times with a
// growing pause: each try reloads what it needs, so a conflict with
// another writer or an answer lost after the catalog took the commit is
// settled by the next try's look at the table.
func (s *Sink) retry(ctx context.Context, what string, try func(attempt int) (done bool, err error)) error {
	var last error
	pause := 50 * time.Millisecond
	for attempt := 1; attempt <= s.opts.MaxAttempts; attempt++ {
		if err := s.stopped(); err != nil {
			return err
		}
		done, err := try(attempt)
		if done && err == nil {
			return nil
		}
		if err == nil {
			err = errors.New("not done")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		if errors.Is(err, errPermanent) {
			return fmt.Errorf("%s: %w", what, err)
		}
		last = err
		s.log.Info("Iceberg commit failed, trying again", zap.String("what", what), zap.Int("attempt", attempt), zap.Error(err))
		d := pause + time.Duration(rand.Int64N(int64(pause)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-time.After(d):
		}
		pause = min(pause*2, 5*time.Second)
	}
	return fmt.Errorf("%s: %d attempts failed, the last: %w", what, s.opts.MaxAttempts, last)
}

// errPermanent marks an error another try cannot fix.
var errPermanent = errors.New("permanent")

type permanent struct{ err error }

func (p permanent) Error() string     { return p.err.Error() }
func (p permanent) Unwrap() []error   { return []error{p.err, errPermanent} }
func asPermanent(err error) error     { return permanent{err} }
func zapString(k, v string) zap.Field { return zap.String(k, v) }
func timeProp(t time.Time) string     { return t.UTC().Format(time.RFC3339Nano) }
func parseTimeProp(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
