package sinktest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/syncd-dev/syncd/internal/sink"
)

// testInventory: the batches a table holds are listed by id, described
// from what the output records, and read back row by row; a batch whose
// attempt stopped between its files is reported incomplete and its rows
// are not read.
func testInventory(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	inv, ok := s.(sink.Inventory)
	if !ok {
		t.Fatalf("%T is not a sink.Inventory", s)
	}
	vr, ok := s.(sink.VersionReader)
	if !ok {
		t.Fatalf("%T is not a sink.VersionReader", s)
	}
	ctx := context.Background()
	const table = "inv"

	if ids, err := inv.HeldBatches(ctx, table); err != nil || len(ids) != 0 {
		t.Fatalf("HeldBatches of a table never written = %v, %v; want none", ids, err)
	}
	if held, err := inv.DescribeBatches(ctx, table); err != nil || len(held) != 0 {
		t.Fatalf("DescribeBatches of a table never written = %v, %v; want none", held, err)
	}

	// b1: one day; b2: two days (two files on a Partitioner).
	d1, d2 := Day, Day.Add(24*time.Hour)
	b1 := Batch(table, "b1", d1, d1.Add(time.Hour))
	r1 := Record("b1", false, subs("k1", d1, 3)...)
	defer r1.Release()
	b2 := Batch(table, "b2", d1.Add(time.Hour), d2.Add(time.Hour))
	s2 := append(subs("k2", d1.Add(2*time.Hour), 2), subs("k2d", d2, 2)...)
	s2[0].Deleted = true
	r2 := Record("b2", false, s2...)
	defer r2.Release()
	if err := sink.CommitRecord(ctx, s, b1, r1); err != nil {
		t.Fatal(err)
	}
	if err := sink.CommitRecord(ctx, s, b2, r2); err != nil {
		t.Fatal(err)
	}
	ids, err := inv.HeldBatches(ctx, table)
	if err != nil || !slices.Equal(ids, []string{"b1", "b2"}) {
		t.Fatalf("HeldBatches = %v, %v; want [b1 b2]", ids, err)
	}
	held, err := inv.DescribeBatches(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	_, partitioned := s.(sink.Partitioner)
	want := []heldWant{{id: "b1", rows: 3, complete: true}, {id: "b2", rows: 4, complete: true}}
	if partitioned {
		want[0].parts = []string{ContractLayout.PartitionOf(d1)}
		want[1].parts = []string{ContractLayout.PartitionOf(d1), ContractLayout.PartitionOf(d2)}
		if want[1].parts[0] == want[1].parts[1] {
			want[1].parts = want[1].parts[:1]
		}
	}
	checkHeld(t, held, want, map[string]sink.Batch{"b1": b1, "b2": b2}, partitioned)

	// The rows of both, with their versions, times and tombstones.
	got := readVersions(t, vr, table)
	var wantRows []string
	for _, x := range [][]Sub{subs("k1", d1, 3), s2} {
		for _, sub := range x {
			wantRows = append(wantRows, versionLine(sink.RowVersion{Key: sub.Key, Version: sub.Version, Time: sub.Time, Deleted: sub.Deleted}))
		}
	}
	slices.Sort(wantRows)
	if !slices.Equal(got, wantRows) {
		t.Fatalf("ReadVersions:\n got %v\nwant %v", got, wantRows)
	}

	_, ok = s.(sink.Partitioner)
	if !ok {
		// One commit is one atomic unit (a load job): no attempt can
		// stop between its files.
		return
	}

	// b3 spans three days; its first attempt stops while writing the
	// third file, the second (a replacing one) while writing the second:
	// files of two attempts and a missing one.
	d3 := d2.Add(24 * time.Hour)
	b3 := Batch(table, "b3", d1.Add(5*time.Hour), d3.Add(time.Hour))
	days := []time.Time{d1.Add(5 * time.Hour), d2.Add(5 * time.Hour), d3}
	var recs []sinkRecord
	for i, d := range days {
		recs = append(recs, sinkRecord{ContractLayout.PartitionOf(d), Record("b3", false, subs(fmt.Sprintf("k3-%d", i), d, 2)...)})
	}
	defer func() {
		for _, r := range recs {
			r.rec.Release()
		}
	}()
	b3.Parts = []string{recs[0].part, recs[1].part, recs[2].part}
	if len(slices.Compact(slices.Clone(b3.Parts))) != 3 {
		t.Fatalf("the layout puts days %v in partitions %v: the suite needs three", days, b3.Parts)
	}
	stopped := []sink.Part{part(recs[0].part, recs[0].rec), part(recs[1].part, recs[1].rec), failingPart(recs[2].part, recs[2].rec)}
	if _, err := s.Commit(ctx, b3, stopped); err == nil {
		t.Fatal("the stopped attempt's commit succeeded")
	}
	b3b := b3
	b3b.Attempt, b3b.Replace = "a2", true
	stopped = []sink.Part{part(recs[0].part, recs[0].rec), failingPart(recs[1].part, recs[1].rec), part(recs[2].part, recs[2].rec)}
	if _, err := s.Commit(ctx, b3b, stopped); err == nil {
		t.Fatal("the second stopped attempt's commit succeeded")
	}
	mustCommitted(t, s, b3, false)
	mustCommitted(t, s, b3b, false)
	if ids, err := inv.HeldBatches(ctx, table); err != nil || !slices.Equal(ids, []string{"b1", "b2", "b3"}) {
		t.Fatalf("HeldBatches = %v, %v; want [b1 b2 b3]", ids, err)
	}
	held, err = inv.DescribeBatches(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 3 || held[2].ID != "b3" || held[2].Complete {
		t.Fatalf("DescribeBatches after two stopped attempts = %+v, want b3 incomplete", held)
	}
	if h := held[2]; !slices.Equal(h.Parts, b3.Parts[:2]) || !slices.Equal(h.AllParts, b3.Parts) {
		t.Errorf("b3: parts %v of %v, want %v of %v", h.Parts, h.AllParts, b3.Parts[:2], b3.Parts)
	}
	if got := readVersions(t, vr, table); !slices.Equal(got, wantRows) {
		t.Fatalf("ReadVersions read rows of an incomplete batch:\n got %v\nwant %v", got, wantRows)
	}

	// The second attempt, fetched again, completes: one attempt's files.
	whole := []sink.Part{part(recs[0].part, recs[0].rec), part(recs[1].part, recs[1].rec), part(recs[2].part, recs[2].rec)}
	if _, err := s.Commit(ctx, b3b, whole); err != nil {
		t.Fatal(err)
	}
	mustCommitted(t, s, b3b, true)
	held, err = inv.DescribeBatches(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if h := held[2]; !h.Complete || h.Attempt != "a2" || h.Rows != 6 || !slices.Equal(h.AllParts, b3.Parts) {
		t.Fatalf("b3 after its attempt completed: %+v, want complete, attempt a2, 6 rows", h)
	}
	for i, d := range days {
		for _, sub := range subs(fmt.Sprintf("k3-%d", i), d, 2) {
			wantRows = append(wantRows, versionLine(sink.RowVersion{Key: sub.Key, Version: sub.Version, Time: sub.Time}))
		}
	}
	slices.Sort(wantRows)
	if got := readVersions(t, vr, table); !slices.Equal(got, wantRows) {
		t.Fatalf("ReadVersions:\n got %v\nwant %v", got, wantRows)
	}
}

type sinkRecord struct {
	part string
	rec  arrow.Record
}

type heldWant struct {
	id       string
	rows     int64
	complete bool
	parts    []string
}

func checkHeld(t *testing.T, held []sink.Held, want []heldWant, batches map[string]sink.Batch, partitioned bool) {
	t.Helper()
	if len(held) != len(want) {
		t.Fatalf("DescribeBatches = %+v, want %d batches", held, len(want))
	}
	for i, w := range want {
		h, b := held[i], batches[w.id]
		if h.ID != w.id || h.Rows != w.rows || h.Complete != w.complete {
			t.Errorf("batch %d: %s, %d rows, complete %v; want %s, %d rows, complete %v", i, h.ID, h.Rows, h.Complete, w.id, w.rows, w.complete)
		}
		if !partitioned {
			continue
		}
		// What the files record of the batch.
		if !slices.Equal(h.Parts, w.parts) || !slices.Equal(h.AllParts, w.parts) {
			t.Errorf("batch %s: parts %v of %v, want %v", h.ID, h.Parts, h.AllParts, w.parts)
		}
		if h.Stream != b.Stream || h.Attempt != b.Attempt || !h.WindowStart.Equal(b.WindowStart) || !h.WindowEnd.Equal(b.WindowEnd) || string(h.Schema) != string(b.Schema) {
			t.Errorf("batch %s: stream %q attempt %q window [%s, %s) schema %q; want %q %q [%s, %s) %q", h.ID,
				h.Stream, h.Attempt, h.WindowStart, h.WindowEnd, h.Schema, b.Stream, b.Attempt, b.WindowStart, b.WindowEnd, b.Schema)
		}
	}
}

func versionLine(v sink.RowVersion) string {
	return fmt.Sprintf("%s@%d t=%d del=%v", v.Key, v.Version.UnixMicro(), v.Time.UnixMicro(), v.Deleted)
}

// readVersions is ReadVersions of table, one line a row, sorted.
func readVersions(t *testing.T, vr sink.VersionReader, table string) []string {
	t.Helper()
	var out []string
	err := vr.ReadVersions(context.Background(), Columns(table), func(v sink.RowVersion) error {
		out = append(out, versionLine(v))
		return nil
	})
	if err != nil {
		t.Fatalf("ReadVersions: %v", err)
	}
	slices.Sort(out)
	return out
}
