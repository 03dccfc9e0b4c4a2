package poller

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	"github.com/syncd-dev/syncd/internal/state"
)

// editStream is a form-like stream whose records can be edited: uid,
// submission_time (the time column), last_updated_at (the version, null
// until an edit) and _deleted. It reconciles against the version index.
type editStream struct {
	sub     map[string]time.Time
	updated map[string]time.Time
}

var editSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.BinaryTypes.String},
	{Name: "submission_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "last_updated_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "_batch_id", Type: arrow.BinaryTypes.String},
	{Name: "_deleted", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

func (s *editStream) Key() string     { return "mem/forms" }
func (s *editStream) Table() string   { return "forms" }
func (s *editStream) Requests() int64 { return 0 }
func (s *editStream) Columns() Columns {
	return Columns{Time: "submission_time", Key: "uid", Version: "last_updated_at"}
}

func (s *editStream) ids(w Window) []string {
	var out []string
	for id, t := range s.sub {
		if !t.Before(w.Start) && t.Before(w.End) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (s *editStream) version(id string) time.Time {
	if u, ok := s.updated[id]; ok {
		return u
	}
	return s.sub[id]
}

func (s *editStream) build(rows *Rows, ids []string) error {
	b := array.NewRecordBuilder(rows.Allocator(), editSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(s.sub[id].UnixMicro()))
		if u, ok := s.updated[id]; ok {
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(u.UnixMicro()))
		} else {
			b.Field(2).AppendNull()
		}
		b.Field(3).(*array.StringBuilder).Append(rows.Lineage().BatchID)
		b.Field(4).(*array.BooleanBuilder).Append(false)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if rec.NumRows() == 0 {
		return nil
	}
	return rows.Record(rec)
}

func (s *editStream) entry(id string) state.Entry {
	return state.Entry{ID: id, Version: state.Version{Time: s.sub[id], Hash: state.TimeVersion(s.version(id))}}
}

func (s *editStream) Read(_ context.Context, w Window, rows *Rows) error {
	ids := s.ids(w)
	for _, id := range ids {
		rows.Index(s.entry(id))
	}
	return s.build(rows, ids)
}

// Reconcile reports the records whose version the index does not hold
// (edits and late imports); this stream never deletes.
func (s *editStream) Reconcile(_ context.Context, w Window, known map[string]state.Version, _ time.Time) (Changes, error) {
	var changed []string
	for _, id := range s.ids(w) {
		if v, ok := known[id]; !ok || v.Hash != state.TimeVersion(s.version(id)) {
			changed = append(changed, id)
		}
	}
	c := Changes{Write: func(rows *Rows) error { return s.build(rows, changed) }}
	for _, id := range changed {
		c.Index.Put = append(c.Index.Put, s.entry(id))
	}
	return c, nil
}

// restoreCase is a stream synced into a disk Parquet sink, with a backup
// of its state taken right after the first sync.
type restoreCase struct {
	t         *testing.T
	now       time.Time
	src       *editStream
	sink      *stopSink
	root      string
	statePath string
	backup    string
	opts      Options
}

func newRestoreCase(t *testing.T) *restoreCase {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	c := &restoreCase{t: t, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), root: filepath.Join(dir, "out"),
		statePath: filepath.Join(dir, "state.db"), backup: filepath.Join(dir, "backup.db")}
	// Two records on two days: a change to both is a reconcile batch of
	// two files.
	c.src = &editStream{
		sub:     map[string]time.Time{"a": c.now.Add(-50 * time.Hour), "b": c.now.Add(-30 * time.Hour)},
		updated: map[string]time.Time{},
	}
	ps, err := parquetsink.New(parquetsink.Options{Root: c.root})
	if err != nil {
		t.Fatal(err)
	}
	c.sink = &stopSink{Sink: ps}
	c.opts = Options{Layout: sink.LayoutDay, SpoolDir: t.TempDir(), Lookback: 30 * 24 * time.Hour, ReconcileEvery: time.Hour, Now: func() time.Time { return c.now }}
	c.run(func(p *Poller) {
		if res := p.Sync(ctx, c.src, time.Time{}); res.Err != nil {
			t.Fatal(res.Err)
		}
	})
	var backup bytes.Buffer
	if _, err := state.BackupBolt(ctx, c.statePath, &backup); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.backup, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// run calls fn with a poller over the state, closed after.
func (c *restoreCase) run(fn func(*Poller)) {
	c.t.Helper()
	store, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: c.statePath})
	if err != nil {
		c.t.Fatal(err)
	}
	defer store.Close()
	fn(New(c.sink, store, c.opts))
}

// restore rolls the state back to the backup and adopts the output, as
// `syncd state restore` does.
func (c *restoreCase) restore() AdoptResult {
	c.t.Helper()
	ctx := context.Background()
	if _, _, err := state.RestoreBolt(ctx, c.statePath, c.backup); err != nil {
		c.t.Fatal(err)
	}
	return c.adopt()
}

func (c *restoreCase) adopt() AdoptResult {
	c.t.Helper()
	var ar AdoptResult
	c.run(func(p *Poller) {
		var err error
		if ar, err = p.Adopt(context.Background(), TargetOf(c.src)); err != nil {
			c.t.Fatal(err)
		}
	})
	return ar
}

// reconcile runs a reconcile pass an hour later.
func (c *restoreCase) reconcile() Result {
	c.t.Helper()
	c.now = c.now.Add(time.Hour)
	var res Result
	c.run(func(p *Poller) { res = p.Reconcile(context.Background(), c.src, time.Time{}) })
	return res
}

// edits counts the edited rows of record id in the output.
func (c *restoreCase) edits(id string) int {
	c.t.Helper()
	return duckCount(c.t, c.root, "forms", "uid = '"+id+"' AND last_updated_at IS NOT NULL")
}

// A restore from a backup taken before a reconcile committed an edit
// adopts the output "so that the batches committed after the backup was
// taken are never written again". A reconcile batch's window lies inside
// committed windows, so adopt counts it as known; the version index must
// still be rebuilt from the output, or the next reconcile finds the edit
// again and writes it a second time.
func TestRestoreThenReconcileWritesNoEditTwice(t *testing.T) {
	c := newRestoreCase(t)
	c.src.updated["a"] = c.now.Add(30 * time.Minute)
	if res := c.reconcile(); res.Err != nil || res.Versions != 1 {
		t.Fatalf("the first reconcile wrote %d versions (%v), want the edit", res.Versions, res.Err)
	}

	ar := c.restore()
	if ar.Indexed == 0 {
		t.Errorf("adopt after the restore left the version index as the backup had it: %+v", ar)
	}
	res := c.reconcile()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Versions != 0 {
		t.Errorf("the reconcile after the restore wrote %d versions, want none: nothing changed at the source", res.Versions)
	}
	if n := c.edits("a"); n != 1 {
		t.Errorf("the edit of a is in the output %d times, want once", n)
	}

	// The index now reflects the output: adopting again reads no rows.
	if ar := c.adopt(); ar.Indexed != 0 {
		t.Errorf("a second adopt rebuilt the index again: %+v", ar)
	}
}

// A reconcile batch that a stop left part-written after the backup was
// taken: the restored state has no intent for it, and its window is
// committed. Adopt must record it open, so the next pass rewrites its
// files under its own id; skipped, its first file stays, and the next
// reconcile writes the same edit again under a new id.
func TestRestoreKeepsAPartWrittenReconcileBatchOpen(t *testing.T) {
	c := newRestoreCase(t)
	c.src.updated["a"] = c.now.Add(30 * time.Minute)
	c.src.updated["b"] = c.now.Add(30 * time.Minute)
	c.sink.failSecond = true
	if res := c.reconcile(); res.Err == nil {
		t.Fatal("the reconcile batch of two files was not stopped after its first")
	}

	if ar := c.restore(); ar.Open != 1 {
		t.Errorf("adopt after the restore recorded %d batches open, want the part-written reconcile batch: %+v", ar.Open, ar)
	}
	if res := c.reconcile(); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, id := range []string{"a", "b"} {
		if n := c.edits(id); n != 1 {
			t.Errorf("the edit of %s is in the output %d times, want once; files: %v", id, n, parquetFiles(t, c.root))
		}
	}
}

// Adopting a state that already reflects its output, the last reconcile
// pass whole, leaves the version index alone: no row is read.
func TestAdoptOfAConsistentStateKeepsTheIndex(t *testing.T) {
	c := newRestoreCase(t)
	c.src.updated["a"] = c.now.Add(30 * time.Minute)
	if res := c.reconcile(); res.Err != nil || res.Versions != 1 {
		t.Fatalf("the reconcile wrote %d versions (%v), want the edit", res.Versions, res.Err)
	}
	if ar := c.adopt(); ar.Batches != 0 || ar.Known != 2 || ar.Indexed != 0 {
		t.Errorf("adopt of a consistent state: %+v; want both batches known and the index kept", ar)
	}
}

// A reconcile batch of two files stopped after its first; by the next run
// the changes it found are gone at the source (say, a late import deleted
// again), so its redo finds none. The file of the stopped attempt must
// still go and its intent be cleared, or readers keep a version the state
// never committed and every run redoes the batch.
func TestReconcileRedoWithNoChangesRemovesTheEarlierAttemptsFile(t *testing.T) {
	c := newRestoreCase(t)
	c.src.updated["a"] = c.now.Add(30 * time.Minute)
	c.src.updated["b"] = c.now.Add(30 * time.Minute)
	c.sink.failSecond = true
	if res := c.reconcile(); res.Err == nil {
		t.Fatal("the reconcile batch of two files was not stopped after its first")
	}
	if n := c.edits("a"); n != 1 {
		t.Fatalf("the stopped reconcile batch left %d rows of its first file, want 1", n)
	}

	clear(c.src.updated)
	if res := c.reconcile(); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.run(func(p *Poller) {
		st, err := p.store.Get(context.Background(), c.src.Key())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Intents) != 0 {
			t.Errorf("the state keeps %d intents after the redo, want none", len(st.Intents))
		}
	})
	for _, id := range []string{"a", "b"} {
		if n := c.edits(id); n != 0 {
			t.Errorf("the output holds %d edited rows of %s, which the source no longer has and the state never committed; files: %v", n, id, parquetFiles(t, c.root))
		}
	}
}
