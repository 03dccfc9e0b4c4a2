package sourcetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
)

// byTime sorts records by time, then key.
func byTime(recs []Record) []Record {
	out := slices.Clone(recs)
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// in is the keys of records with a time in [from, to).
func in(recs []Record, from, to time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range recs {
		if !r.Time.Before(from) && r.Time.Before(to) {
			out[r.Key] = r.Time
		}
	}
	return out
}

// bounds picks a range whose both ends are the exact times of records:
// the one at from must be read, the one at to must not.
func bounds(t *testing.T, recs []Record) (from, to time.Time) {
	t.Helper()
	recs = byTime(recs)
	if len(recs) < 8 {
		t.Fatalf("the service holds %d records: too few to judge paging", len(recs))
	}
	return recs[len(recs)/4].Time, recs[3*len(recs)/4].Time
}

// checkExactlyOnce checks that rows are want's records, each once, each
// inside its batch's window.
func checkExactlyOnce(t *testing.T, what string, e *env, rows []Row, want map[string]time.Time) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Key]++
	}
	var twice, missing, extra []string
	for k, n := range seen {
		if n > 1 {
			twice = append(twice, k)
		}
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if seen[k] == 0 {
			missing = append(missing, fmt.Sprintf("%s@%s", k, want[k].Format(time.RFC3339Nano)))
		}
	}
	slices.Sort(twice)
	slices.Sort(missing)
	slices.Sort(extra)
	if len(twice)+len(missing)+len(extra) > 0 {
		t.Errorf("%s: %d rows for %d records: twice %v, missing %v, not in the range %v", what, len(rows), len(want), twice, missing, extra)
	}
}

// checkInWindows checks that every row lies in its batch's window.
func checkInWindows(t *testing.T, e *env) {
	t.Helper()
	for _, b := range e.snk.Batches() {
		for _, r := range b.Rows {
			if r.Time.Before(b.WindowStart) || !r.Time.Before(b.WindowEnd) {
				t.Errorf("batch %s of [%s, %s) holds %s at %s, outside its window", b.ID, b.WindowStart.Format(time.RFC3339Nano), b.WindowEnd.Format(time.RFC3339Nano), r.Key, r.Time.Format(time.RFC3339Nano))
			}
		}
	}
}

// testPaging: a backfill of [from, to), both ends the times of records,
// several windows of several pages, gives every record of the range once.
func testPaging(t *testing.T, h Harness) {
	e := start(t, h)
	from, to := bounds(t, e.svc.Records(t))
	// Records right at and around both ends (a stream whose time is its
	// version time adds them now: past to, where they must not be read).
	for _, at := range []time.Time{from.Add(-time.Millisecond), from, to.Add(-time.Millisecond), to} {
		e.svc.Add(t, at)
	}
	want := in(e.svc.Records(t), from, to)
	ok(t, "backfill", e.p.Backfill(context.Background(), e.s, from, to, 1, nil))
	rows := e.snk.Rows()
	checkExactlyOnce(t, fmt.Sprintf("backfill of [%s, %s)", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)), e, rows, want)
	checkInWindows(t, e)
	batches := len(e.snk.Batches())
	t.Logf("%d records in the range, %d batches, %d requests", len(want), batches, e.s.Requests())
	if batches < 2 {
		t.Errorf("the range was read in %d batch(es): the harness must make it need several (MaxRowsPerBatch %d)", batches, h.MaxRowsPerBatch)
	}
	// A second backfill of the same range reads and writes nothing.
	before := e.s.Requests()
	ok(t, "second backfill", e.p.Backfill(context.Background(), e.s, from, to, 1, nil))
	if n := len(e.snk.Rows()); n != len(rows) {
		t.Errorf("a second backfill of a committed range wrote %d more rows", n-len(rows))
	}
	if e.s.Requests() != before {
		t.Errorf("a second backfill of a committed range made %d requests", e.s.Requests()-before)
	}
}

// checkCover checks that the windows, in the order given, are in time
// order and cover [from, to) with no gap and no overlap.
func checkCover(t *testing.T, what string, ws []Committed, from, to time.Time) {
	t.Helper()
	if len(ws) == 0 {
		t.Errorf("%s: no window committed", what)
		return
	}
	at := from
	for _, w := range ws {
		switch {
		case w.Window.Start.Before(at):
			t.Errorf("%s: window [%s, %s) overlaps what came before (up to %s)", what, w.Window.Start.Format(time.RFC3339Nano), w.Window.End.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		case w.Window.Start.After(at):
			t.Errorf("%s: a gap [%s, %s) before window [%s, %s)", what, at.Format(time.RFC3339Nano), w.Window.Start.Format(time.RFC3339Nano), w.Window.Start.Format(time.RFC3339Nano), w.Window.End.Format(time.RFC3339Nano))
		}
		if !w.Window.Start.Before(w.Window.End) {
			t.Errorf("%s: an empty window [%s, %s)", what, w.Window.Start, w.Window.End)
		}
		at = w.Window.End
	}
	if !at.Equal(to) {
		t.Errorf("%s: the windows end at %s, not at %s", what, at.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
}

// testCursor: the windows the engine committed cover the range in time
// order with no gap and no overlap, each batch holds what Count says its
// window holds, the state records the range as one interval, and a later
// pass reads only what came after it, each once.
func testCursor(t *testing.T, h Harness) {
	ctx := context.Background()
	e := start(t, h)
	recs := e.svc.Records(t)
	from, to := bounds(t, recs)
	want := in(recs, from, to)
	ok(t, "backfill", e.p.Backfill(ctx, e.s, from, to, 1, nil))
	commits := e.store.Commits()
	checkCover(t, "the backfill's windows", commits, from, to)

	byBatch := map[string]int{}
	for _, b := range e.snk.Batches() {
		byBatch[b.ID] = len(b.Rows)
	}
	if c, isCounter := e.s.(poller.Counter); !isCounter {
		t.Logf("%T is not a poller.Counter: no count to compare with Read", e.s)
	} else {
		for _, w := range commits {
			n, err := c.Count(ctx, w.Window.Start, w.Window.End)
			if err != nil {
				t.Fatal(err)
			}
			if n != byBatch[w.BatchID] && !(h.CountsLow && n < byBatch[w.BatchID]) {
				t.Errorf("Count([%s, %s)) = %d, Read gave %d", w.Window.Start.Format(time.RFC3339Nano), w.Window.End.Format(time.RFC3339Nano), n, byBatch[w.BatchID])
			}
		}
		n, err := c.Count(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(want) && !(h.CountsLow && n < len(want)) {
			t.Errorf("Count of the range = %d, the service holds %d records in it", n, len(want))
		}
	}

	// Later: new records; the next pass reads from where the range ended.
	e.clk.Add(time.Hour)
	for i := range 3 {
		e.svc.Add(t, e.clk.Now().Add(-time.Duration(30+i)*time.Minute))
	}
	e.clk.Add(10 * time.Minute)
	first := len(e.snk.Rows())
	res := e.p.Sync(ctx, e.s, from)
	ok(t, "the next pass", res)
	horizon := e.p.Horizon()
	later := e.snk.Rows()[first:]
	checkExactlyOnce(t, fmt.Sprintf("the next pass over [%s, %s)", to.Format(time.RFC3339Nano), horizon.Format(time.RFC3339Nano)), e, later, in(e.svc.Records(t), to, horizon))
	checkCover(t, "every window", e.store.Commits(), from, horizon)
	st, err := e.store.Get(ctx, e.s.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Committed) != 1 || !st.Committed[0].Start.Equal(from) || !st.Committed[0].End.Equal(horizon) {
		t.Errorf("the state covers %v, want [%s, %s)", st.Committed, from.Format(time.RFC3339Nano), horizon.Format(time.RFC3339Nano))
	}
}

// latest is each key's row of the latest version.
func latest(rows []Row) map[string]Row {
	out := map[string]Row{}
	for _, r := range rows {
		if o, ok := out[r.Key]; !ok || r.Version.After(o.Version) {
			out[r.Key] = r
		}
	}
	return out
}

// reread runs what brings changes to the sink: the live pass, and for a
// Reconciler the reconcile of everything committed.
func reread(t *testing.T, e *env) {
	t.Helper()
	ok(t, "the live pass", e.p.Sync(context.Background(), e.s, time.Time{}))
	if _, isRec := e.s.(poller.Reconciler); isRec {
		ok(t, "the reconcile", e.p.Reconcile(context.Background(), e.s, time.Unix(0, 0).UTC()))
	}
}

// testVersions: after an edit, the record's new version reaches the sink
// with a later version value (the service's, when it says it), and no
// other record is written again.
func testVersions(t *testing.T, h Harness) {
	e := start(t, h)
	ok(t, "the first pass", e.p.Sync(context.Background(), e.s, time.Time{}))
	before := latest(e.snk.Rows())
	checkExactlyOnce(t, "the first pass", e, e.snk.Rows(), in(e.svc.Records(t), time.Unix(0, 0), e.p.Horizon()))
	recs := byTime(e.svc.Records(t))
	e.clk.Add(time.Hour)
	k := ""
	for _, r := range recs[len(recs)/2:] {
		if _, ok := before[r.Key]; ok && e.svc.Edit(t, r.Key) {
			k = r.Key
			break
		}
	}
	if k == "" {
		t.Fatal("no record of the second half could be edited")
	}
	e.clk.Add(10 * time.Minute)
	n := len(e.snk.Rows())
	reread(t, e)
	again := e.snk.Rows()[n:]
	var keys []string
	for _, r := range again {
		keys = append(keys, r.Key)
	}
	if !slices.Equal(keys, []string{k}) {
		t.Fatalf("after an edit of %s the sink got rows of %v, want one of %s", k, keys, k)
	}
	got := again[0]
	if !got.Version.After(before[k].Version) {
		t.Errorf("the edited %s has version %s, not later than %s", k, got.Version.Format(time.RFC3339Nano), before[k].Version.Format(time.RFC3339Nano))
	}
	for _, r := range e.svc.Records(t) {
		if r.Key == k && !r.Version.IsZero() && !r.Version.Equal(got.Version) {
			t.Errorf("the edited %s has version %s in the sink, %s in the service", k, got.Version.Format(time.RFC3339Nano), r.Version.Format(time.RFC3339Nano))
		}
	}
	// Nothing changed since: the next passes write nothing.
	e.clk.Add(10 * time.Minute)
	n = len(e.snk.Rows())
	reread(t, e)
	if extra := e.snk.Rows()[n:]; len(extra) != 0 {
		t.Errorf("passes after nothing changed wrote %d rows: %v", len(extra), extra)
	}
}

// testDeletions (a Reconciler): after a deletion and an edit in one
// committed window, Reconcile of it returns the deleted record in
// Changes.Index.Gone and the edited one's new version in Put, and nothing
// else; the engine's reconcile writes a tombstone for the deleted and a
// row for the edited, and the index drops the one and moves the other.
func testDeletions(t *testing.T, h Harness) {
	ctx := context.Background()
	e := start(t, h)
	rec, isRec := e.s.(poller.Reconciler)
	if !isRec {
		t.Logf("%T is not a poller.Reconciler: its records are never reconciled, so deletions are not its to find", e.s)
		return
	}
	ok(t, "the first pass", e.p.Sync(ctx, e.s, time.Time{}))
	// A window with at least two records: delete one, edit another.
	var w Batch
	for _, b := range e.snk.Batches() {
		if len(b.Rows) >= 2 {
			w = b
			break
		}
	}
	if w.ID == "" {
		t.Fatal("no batch holds two records")
	}
	gone, edited := w.Rows[0].Key, w.Rows[1].Key
	e.clk.Add(time.Hour)
	if !e.svc.Delete(t, gone) {
		t.Logf("the service cannot delete a record: deletions are not checked")
		return
	}
	if !e.svc.Edit(t, edited) {
		t.Fatalf("record %s cannot be edited", edited)
	}
	e.clk.Add(10 * time.Minute)

	known := map[string]state.Version{}
	err := e.store.Versions(ctx, e.s.Key(), w.WindowStart, w.WindowEnd, func(en state.Entry) error {
		known[en.ID] = en.Version
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != len(w.Rows) {
		t.Fatalf("the index holds %d records of the window, the batch %d", len(known), len(w.Rows))
	}
	ch, err := rec.Reconcile(ctx, poller.Window{Start: w.WindowStart, End: w.WindowEnd, Count: -1}, known, e.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	var goneIDs, putIDs []string
	for _, en := range ch.Index.Gone {
		goneIDs = append(goneIDs, en.ID)
		if en.Version != known[en.ID] {
			t.Errorf("Gone names %s with %+v, the index had %+v", en.ID, en.Version, known[en.ID])
		}
	}
	for _, en := range ch.Index.Put {
		putIDs = append(putIDs, en.ID)
		if en.Hash == known[en.ID].Hash {
			t.Errorf("Put names %s with the version the index holds", en.ID)
		}
	}
	if !slices.Equal(goneIDs, []string{gone}) || !slices.Equal(putIDs, []string{edited}) {
		t.Errorf("Reconcile after deleting %s and editing %s: gone %v, put %v", gone, edited, goneIDs, putIDs)
	}

	n := len(e.snk.Rows())
	ok(t, "the reconcile", e.p.Reconcile(ctx, e.s, time.Unix(0, 0).UTC()))
	got := map[string]Row{}
	for _, r := range e.snk.Rows()[n:] {
		if _, dup := got[r.Key]; dup {
			t.Errorf("the reconcile wrote %s twice", r.Key)
		}
		got[r.Key] = r
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, sortedOf(gone, edited)) {
		t.Errorf("the reconcile wrote rows of %v, want %s (tombstone) and %s", keys, gone, edited)
	}
	if r := got[gone]; !r.Deleted {
		t.Errorf("the row of the deleted %s is no tombstone: %+v", gone, r)
	}
	if r := got[edited]; r.Deleted || r.Key == "" {
		t.Errorf("the row of the edited %s: %+v", edited, r)
	}
	after := map[string]state.Version{}
	if err := e.store.Versions(ctx, e.s.Key(), w.WindowStart, w.WindowEnd, func(en state.Entry) error {
		after[en.ID] = en.Version
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, still := after[gone]; still {
		t.Errorf("the index still holds the deleted %s", gone)
	}
	if after[edited].Hash == known[edited].Hash {
		t.Errorf("the index holds the old version of the edited %s", edited)
	}
	// Reconciled again, nothing is found.
	n = len(e.snk.Rows())
	ok(t, "a second reconcile", e.p.Reconcile(ctx, e.s, time.Unix(0, 0).UTC()))
	if extra := e.snk.Rows()[n:]; len(extra) != 0 {
		t.Errorf("a second reconcile wrote %d rows: %v", len(extra), strings.TrimSpace(fmt.Sprint(extra)))
	}
}

func sortedOf(s ...string) []string {
	slices.Sort(s)
	return s
}
