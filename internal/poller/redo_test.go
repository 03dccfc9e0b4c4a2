package poller

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	_ "github.com/marcboeker/go-duckdb"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// stopSink is the disk Parquet sink with two faults, each once: the first
// batch of several files fails on its second (a full disk, a kill: the
// first file is in place, the second is not), and the first batch with
// stale files stops after its own files landed, before it removes them.
type stopSink struct {
	*parquetsink.Sink
	failSecond, stopBeforeStale bool
}

func (s *stopSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	if s.failSecond && len(parts) > 1 {
		s.failSecond = false
		parts = slices.Clone(parts)
		parts[1].Records.Each = func(func(arrow.Record) error) error { return errors.New("no space left on device") }
		return s.Sink.Commit(ctx, b, parts)
	}
	if s.stopBeforeStale && len(b.Stale) > 0 {
		s.stopBeforeStale = false
		b.Stale = nil
		n, err := s.Sink.Commit(ctx, b, parts)
		if err != nil {
			return n, err
		}
		return n, errors.New("killed after the files landed, before the stale ones were removed")
	}
	return s.Sink.Commit(ctx, b, parts)
}

// parquetFiles lists the Parquet files under root, relative to it.
func parquetFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// duckCount is what a reader of the output sees: the rows DuckDB counts in
// table's files under root that match where ("" for all).
func duckCount(t *testing.T, root, table, where string) int {
	t.Helper()
	if len(parquetFiles(t, filepath.Join(root, table))) == 0 {
		return 0 // read_parquet refuses a glob that matches nothing
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := "SELECT count(*) FROM read_parquet('" + filepath.Join(root, table) + "/**/*.parquet')"
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// twoDays is a stream of one record on each of two days, and a poller
// over a disk Parquet sink whose first two-file batch stops after its
// first file.
func twoDays(t *testing.T, stopBeforeStale bool) (*Poller, *memStream, *stopSink, string) {
	t.Helper()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	src := &memStream{times: []time.Time{
		time.Date(2026, 5, 30, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 5, 31, 12, 0, 0, 0, time.UTC),
	}}
	root := t.TempDir()
	ps, err := parquetsink.New(parquetsink.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	snk := &stopSink{Sink: ps, failSecond: true, stopBeforeStale: stopBeforeStale}
	p := New(snk, openTestStore(t), Options{SpoolDir: t.TempDir(), Now: func() time.Time { return now }, Layout: sink.LayoutDay})
	if res := p.Sync(context.Background(), src, time.Time{}); res.Err == nil {
		t.Fatal("the first run wrote both files; it should stop after the first")
	}
	if files := parquetFiles(t, root); len(files) != 1 {
		t.Fatalf("after the stopped run the output holds %v, want the first day's file only", files)
	}
	return p, src, snk, root
}

// A batch over two days stopped after its first file is fetched again;
// the first day's record is gone at the source by then, so the redo
// writes the second day only. The first attempt's file of the first day
// must not stay: the state never committed its row.
func TestRedoWithFewerPartitionsRemovesTheEarlierAttemptsFile(t *testing.T) {
	ctx := context.Background()
	p, src, _, root := twoDays(t, false)
	src.times = src.times[1:]
	if res := p.Sync(ctx, src, time.Time{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if n := duckCount(t, root, "versions", ""); n != 1 {
		t.Errorf("readers see %d rows, want the 1 the source holds and the state committed; files: %v", n, parquetFiles(t, root))
	}
}

// The same, but every record of the window is gone by the redo: it reads
// no row and writes no file, yet the first attempt's file must go, or
// readers keep a deleted record the state committed as never written
// (and no tombstone ever follows).
func TestRedoWithNoRowsRemovesTheEarlierAttemptsFiles(t *testing.T) {
	ctx := context.Background()
	p, src, _, root := twoDays(t, false)
	src.times = nil
	res := p.Sync(ctx, src, time.Time{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st, err := p.store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Intents) != 0 || st.Rows != 0 {
		t.Errorf("state after the redo: %d intents, %d rows; want the window committed with none", len(st.Intents), st.Rows)
	}
	if files := parquetFiles(t, root); len(files) != 0 {
		t.Errorf("the output holds %v after a redo with no rows, want nothing", files)
	}
}

// A redo whose files landed but which stopped before it removed the
// earlier attempt's file of a partition it no longer writes: its intent
// still names that partition, so the next run finds the batch open and
// removes the file. (An intent naming only the redo's files made the
// batch look committed, and the file stayed for good.)
func TestStopBeforeStaleRemovalIsRecovered(t *testing.T) {
	ctx := context.Background()
	p, src, snk, root := twoDays(t, true)
	src.times = src.times[1:]
	if res := p.Sync(ctx, src, time.Time{}); res.Err == nil {
		t.Fatal("the redo was not stopped before it removed the stale file")
	}
	if snk.stopBeforeStale {
		t.Fatal("the redo named no stale file")
	}
	st, err := p.store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Intents) != 1 {
		t.Fatalf("after the stop the state has %d intents, want the batch open", len(st.Intents))
	}
	for _, in := range st.Intents {
		if len(in.Parts) != 2 {
			t.Errorf("the open intent names partitions %v, want both days: the stale file is still in place", in.Parts)
		}
	}

	if res := p.Sync(ctx, src, time.Time{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if st, err = p.store.Get(ctx, src.Key()); err != nil {
		t.Fatal(err)
	}
	if len(st.Intents) != 0 {
		t.Errorf("after the next run the state has %d intents, want none", len(st.Intents))
	}
	if n := duckCount(t, root, "versions", ""); n != 1 {
		t.Errorf("readers see %d rows, want the 1 the source holds and the state committed; files: %v", n, parquetFiles(t, root))
	}
}

// `syncd state adopt` between that stop and the next run: the batch's
// files of the redo are whole, but the earlier attempt's file lies beside
// them. Adopt leaves the batch open rather than commit it, so the next
// run still removes that file.
func TestAdoptLeavesABatchWithStaleFilesOpen(t *testing.T) {
	ctx := context.Background()
	p, src, _, root := twoDays(t, true)
	src.times = src.times[1:]
	if res := p.Sync(ctx, src, time.Time{}); res.Err == nil {
		t.Fatal("the redo was not stopped before it removed the stale file")
	}
	ar, err := p.Adopt(ctx, TargetOf(src))
	if err != nil {
		t.Fatal(err)
	}
	if ar.Batches != 0 || ar.Open != 1 {
		t.Errorf("adopt: %+v; want the batch left open", ar)
	}
	if res := p.Sync(ctx, src, time.Time{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if n := duckCount(t, root, "versions", ""); n != 1 {
		t.Errorf("readers see %d rows, want the 1 the source holds and the state committed; files: %v", n, parquetFiles(t, root))
	}
}
