package sinktest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/syncd-dev/syncd/internal/sink"
)

// reader is the sink's Reader, or the test fails: the suite cannot judge
// a sink it cannot read back.
func reader(t *testing.T, s sink.Sink) Reader {
	t.Helper()
	r, ok := s.(Reader)
	if !ok {
		t.Fatalf("%T does not implement sinktest.Reader: wrap the sink with a reader of its output", s)
	}
	return r
}

// testWholeOrNothing: a commit that stops part-way (its rows fail, or its
// context ends) leaves nothing a reader sees, and Committed says no; the
// batch committed afterwards is there whole.
func testWholeOrNothing(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	cases := []struct {
		name string
		stop func(t *testing.T, s sink.Sink, b sink.Batch, rec arrow.Record) error
	}{
		{"context ended", func(t *testing.T, s sink.Sink, b sink.Batch, rec arrow.Record) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return sink.CommitRecord(ctx, s, b, rec)
		}},
		{"rows failed part-way", func(t *testing.T, s sink.Sink, b sink.Batch, rec arrow.Record) error {
			if _, ok := s.(sink.Partitioner); ok {
				b.Parts = []string{ContractLayout.PartitionOf(b.WindowStart)}
				_, err := s.Commit(context.Background(), b, sink.Parts{failingPart(b.Parts[0], rec)})
				return err
			}
			whole := failingPart("", rec)
			whole.Whole = true
			_, err := s.Commit(context.Background(), b, sink.Parts{whole})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t)
			const table = "whole"
			b := Batch(table, "w1", Day, Day.Add(time.Hour))
			rec := Record(b.ID, false, subs("w", Day, 5)...)
			defer rec.Release()
			if err := tc.stop(t, s, b, rec); err == nil {
				t.Fatal("the stopped commit succeeded")
			}
			mustCommitted(t, s, b, false)
			if rows := reader(t, s).ReadRows(t, table); len(rows) != 0 {
				t.Fatalf("a stopped commit left %d rows visible: %v", len(rows), rows)
			}
			if err := sink.CommitRecord(context.Background(), s, b, rec); err != nil {
				t.Fatal(err)
			}
			mustCommitted(t, s, b, true)
			if got := counts(reader(t, s).ReadRows(t, table)); len(got) != 5 || got["w-0"] != 1 || got["w-4"] != 1 {
				t.Fatalf("rows after the commit: %v, want w-0..w-4 once each", got)
			}
		})
	}
}

// testReplay: committing a batch again adds nothing; committing it with
// other rows (a batch rebuilt differently) adds nothing either, whether
// the sink keeps what is there or refuses; Committed says no before and
// yes after, and no for a batch never committed.
func testReplay(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	ctx := context.Background()
	const table = "replay"
	b := Batch(table, "r1", Day, Day.Add(time.Hour))
	other := Batch(table, "r2", Day.Add(time.Hour), Day.Add(2*time.Hour))
	mustCommitted(t, s, b, false)
	rec := Record(b.ID, false, subs("r", Day, 3)...)
	defer rec.Release()
	more := Record(b.ID, false, subs("r", Day, 4)...)
	defer more.Release()
	if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
		t.Fatal(err)
	}
	mustCommitted(t, s, b, true)
	mustCommitted(t, s, other, false)
	for i := range 2 {
		if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
	}
	_ = sink.CommitRecord(ctx, s, b, more) // BigQuery refuses a batch whose row count changed
	want := map[string]int{"r-0": 1, "r-1": 1, "r-2": 1}
	if got := counts(reader(t, s).ReadRows(t, table)); !maps.Equal(got, want) {
		t.Fatalf("after replays: %v, want %v", got, want)
	}
}

// testStoppedAttempt: a batch of several files whose attempt stopped
// between them is not committed; fetched again (Replace) with fewer
// partitions (Stale), it holds exactly the new attempt's rows.
func testStoppedAttempt(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	_, ok := s.(sink.Partitioner)
	if !ok {
		t.Fatalf("%T is not a sink.Partitioner: run the multi-file contract only over sinks that write files", s)
	}
	ctx := context.Background()
	const table = "stopped"
	d1, d2, d3 := Day, Day.Add(24*time.Hour), Day.Add(48*time.Hour)
	b := Batch(table, "s1", d1, d3.Add(time.Hour))
	r1 := Record(b.ID, false, subs("s1", d1, 2)...)
	defer r1.Release()
	r2 := Record(b.ID, false, subs("s2", d2, 2)...)
	defer r2.Release()
	r3 := Record(b.ID, false, subs("s3", d3, 2)...)
	defer r3.Release()
	b.Parts = []string{ContractLayout.PartitionOf(d1), ContractLayout.PartitionOf(d2), ContractLayout.PartitionOf(d3)}
	if _, err := s.Commit(ctx, b, []sink.Part{part(b.Parts[0], r1), part(b.Parts[1], r2), failingPart(b.Parts[2], r3)}); err == nil {
		t.Fatal("the stopped attempt succeeded")
	}
	mustCommitted(t, s, b, false)

	// Every file in place, but of two attempts: a rewriting attempt that
	// stopped after its first file. Neither attempt is the batch.
	mixed := Batch(table, "s0", d1, d3.Add(time.Hour))
	mixed.Parts = b.Parts
	all := []sink.Part{part(b.Parts[0], r1), part(b.Parts[1], r2), part(b.Parts[2], r3)}
	if _, err := s.Commit(ctx, mixed, all); err != nil {
		t.Fatal(err)
	}
	rewrite := mixed
	rewrite.Attempt, rewrite.Replace = "a2", true
	if _, err := s.Commit(ctx, rewrite, []sink.Part{part(b.Parts[0], r1), failingPart(b.Parts[1], r2), part(b.Parts[2], r3)}); err == nil {
		t.Fatal("the stopped rewrite succeeded")
	}
	mustCommitted(t, s, mixed, false)
	mustCommitted(t, s, rewrite, false)
	if _, err := s.Commit(ctx, rewrite, all); err != nil {
		t.Fatal(err)
	}
	mustCommitted(t, s, rewrite, true)
	if pu, ok := s.(sink.Purger); ok {
		if err := pu.Purge(ctx, table); err != nil {
			t.Fatal(err)
		}
		// The purge took the stopped attempt's files too: stop it again,
		// so that its file of d2 is there to go stale below (without
		// them, a sink that ignores Stale passed).
		if _, err := s.Commit(ctx, b, []sink.Part{part(b.Parts[0], r1), part(b.Parts[1], r2), failingPart(b.Parts[2], r3)}); err == nil {
			t.Fatal("the stopped attempt succeeded")
		}
	}

	// Fetched again: the rows of d2 moved to d3 (say, edited times); the
	// first attempt's file of d2 is stale.
	again := b
	again.Attempt, again.Replace = "a2", true
	again.Parts = []string{b.Parts[0], b.Parts[2]}
	again.Stale = []string{b.Parts[1]}
	n1 := Record(b.ID, false, subs("n1", d1, 3)...)
	defer n1.Release()
	n3 := Record(b.ID, false, subs("n3", d3, 1)...)
	defer n3.Release()
	if _, err := s.Commit(ctx, again, []sink.Part{part(again.Parts[0], n1), part(again.Parts[1], n3)}); err != nil {
		t.Fatal(err)
	}
	mustCommitted(t, s, again, true)
	mustCommitted(t, s, b, false) // the first attempt's files are gone
	want := map[string]int{"n1-0": 1, "n1-1": 1, "n1-2": 1, "n3-0": 1}
	if got := counts(reader(t, s).ReadRows(t, table)); !maps.Equal(got, want) {
		t.Fatalf("rows after the second attempt: %v, want %v", got, want)
	}
	// A replay of the committed attempt keeps its files.
	if _, err := s.Commit(ctx, func() sink.Batch { x := again; x.Replace = false; return x }(), []sink.Part{part(again.Parts[0], n1), part(again.Parts[1], n3)}); err != nil {
		t.Fatal(err)
	}
	if got := counts(reader(t, s).ReadRows(t, table)); !maps.Equal(got, want) {
		t.Fatalf("rows after a replay: %v, want %v", got, want)
	}
}

// testPurge: a purged table reads empty and holds no batch; it can be
// written again; purging a table that has no output succeeds.
func testPurge(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	pu, ok := s.(sink.Purger)
	if !ok {
		t.Fatalf("%T is not a sink.Purger", s)
	}
	ctx := context.Background()
	const table = "purged"
	if err := pu.Purge(ctx, "never_written"); err != nil {
		t.Fatalf("purge of a table without output: %v", err)
	}
	b := Batch(table, "p1", Day, Day.Add(time.Hour))
	rec := Record(b.ID, false, subs("p", Day, 3)...)
	defer rec.Release()
	if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
		t.Fatal(err)
	}
	if err := pu.Purge(ctx, table); err != nil {
		t.Fatal(err)
	}
	if rows := reader(t, s).ReadRows(t, table); len(rows) != 0 {
		t.Fatalf("%d rows after the purge", len(rows))
	}
	// Committed of a purged batch is not asked: BigQuery remembers a job
	// id forever, which is why a refresh gives the table new batch ids
	// (the state's generation is part of them).
	if inv, ok := s.(sink.Inventory); ok {
		if ids, err := inv.HeldBatches(ctx, table); err != nil || len(ids) != 0 {
			t.Fatalf("HeldBatches after the purge = %v, %v", ids, err)
		}
	}
	// A refresh writes the table again, under new batch ids.
	b2 := b
	b2.ID = "p1-g2"
	rec2 := Record(b2.ID, false, subs("p", Day, 3)...)
	defer rec2.Release()
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Fatal(err)
	}
	if got := counts(reader(t, s).ReadRows(t, table)); len(got) != 3 {
		t.Fatalf("rows after writing the purged table again: %v", got)
	}
	if err := pu.Purge(ctx, table); err != nil {
		t.Fatalf("a second purge: %v", err)
	}
}

// testEvolution: a batch with a new column lands beside the older ones;
// the older rows read it as null.
func testEvolution(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	ctx := context.Background()
	const table = "evolving"
	b1 := Batch(table, "e1", Day, Day.Add(time.Hour))
	r1 := Record(b1.ID, false, subs("old", Day, 2)...)
	defer r1.Release()
	b2 := Batch(table, "e2", Day.Add(time.Hour), Day.Add(2*time.Hour))
	news := subs("new", Day.Add(time.Hour), 2)
	news[0].Extra = "yes"
	r2 := Record(b2.ID, true, news...)
	defer r2.Release()
	for _, c := range []struct {
		b   sink.Batch
		rec arrow.Record
	}{{b1, r1}, {b2, r2}} {
		if err := sink.CommitRecord(ctx, s, c.b, c.rec); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, r := range reader(t, s).ReadRows(t, table) {
		got[r.Key] = r.BatchID + ":" + r.Extra
	}
	want := map[string]string{"old-0": "e1:", "old-1": "e1:", "new-0": "e2:yes", "new-1": "e2:"}
	if !maps.Equal(got, want) {
		t.Fatalf("rows after the schema grew: %v, want %v", got, want)
	}
}

// testLatestView: versions of a record in several batches, and a
// tombstone: sink.LatestQuery (run by the backend's reader) keeps the
// latest version of each record and drops the deleted ones.
func testLatestView(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	s := newSink(t)
	ctx := context.Background()
	const table = "versions"
	at := func(h int) time.Time { return Day.Add(time.Duration(h) * time.Hour) }
	batches := []struct {
		id   string
		from time.Time
		subs []Sub
	}{
		{"v1", at(0), []Sub{{Key: "a", Time: at(0), Version: at(0)}, {Key: "b", Time: at(0), Version: at(0)}, {Key: "c", Time: at(0), Version: at(0)}}},
		// Reconciled later: a edited, b deleted, c unchanged.
		{"v2", at(1), []Sub{{Key: "a", Time: at(0), Version: at(5)}, {Key: "b", Time: at(0), Version: at(6), Deleted: true}}},
		// A late import of an older version of a: not the latest.
		{"v3", at(2), []Sub{{Key: "a", Time: at(0), Version: at(3)}}},
	}
	for _, x := range batches {
		b := Batch(table, x.id, x.from, x.from.Add(time.Hour))
		// Rows keep their own submission time; the window and partition
		// follow the version here, as for bookings.
		for i := range x.subs {
			x.subs[i].Time = x.from
		}
		rec := Record(b.ID, false, x.subs...)
		err := sink.CommitRecord(ctx, s, b, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{"a": at(5).UnixMicro(), "c": at(0).UnixMicro()}
	if got := reader(t, s).Latest(t, table); !maps.Equal(got, want) {
		t.Fatalf("latest view %v, want %v", got, want)
	}
	var tombstones []string
	for _, r := range reader(t, s).ReadRows(t, table) {
		if r.Deleted {
			tombstones = append(tombstones, fmt.Sprintf("%s@%d", r.Key, r.Version))
		}
	}
	if want := []string{fmt.Sprintf("b@%d", at(6).UnixMicro())}; !slices.Equal(tombstones, want) {
		t.Fatalf("tombstones %v, want %v", tombstones, want)
	}
}
