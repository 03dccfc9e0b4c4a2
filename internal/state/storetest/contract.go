package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
)

// view is a state as the suite compares it: empty collections as nil, in
// JSON (which is what both stores keep).
func view(t *testing.T, st state.StreamState) string {
	t.Helper()
	if len(st.Committed) == 0 {
		st.Committed = nil
	}
	if len(st.Intents) == 0 {
		st.Intents = nil
	}
	if len(st.Schema) == 0 {
		st.Schema = nil
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw) + " damaged=" + st.Damaged
}

func same(t *testing.T, what string, got, want state.StreamState) {
	t.Helper()
	if g, w := view(t, got), view(t, want); g != w {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// testMethods walks every state-changing method of the Store over one
// form, checking the whole state after each step, then reopens the store
// and reads the same.
func testMethods(t *testing.T, p Place) {
	ctx := context.Background()
	clk := NewClock(H(1000))
	s := open(t, p, Options{Now: clk.Now})
	if got := get(t, s, "f1"); view(t, got) != view(t, state.StreamState{Key: "f1"}) {
		t.Fatalf("Get of a form never written = %+v, want the zero state with its id", got)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List of an empty store = %v, %v", list, err)
	}
	want := state.StreamState{Key: "f1"}
	steps := []struct {
		name string
		do   func() error
		want func(w *state.StreamState)
	}{
		{"RecordIntent", func() error {
			return s.RecordIntent(ctx, "f1", state.Intent{BatchID: "b1", Table: "t1", Start: H(0), End: H(1), Rows: 3, Parts: []string{"p0"}, Attempt: "a1"})
		}, func(w *state.StreamState) {
			w.Intents = map[string]state.Intent{"b1": {BatchID: "b1", Table: "t1", Start: H(0), End: H(1), Rows: 3, Parts: []string{"p0"}, Attempt: "a1", CreatedAt: clk.Now()}}
			w.UpdatedAt = clk.Now()
		}},
		{"Commit", func() error {
			return s.Commit(ctx, "f1", state.Commit{BatchID: "b1", Window: Win(0, 1), Rows: 3, Schema: json.RawMessage(`{"v":1}`)})
		}, func(w *state.StreamState) {
			w.Intents, w.Committed, w.Rows, w.Batches = nil, state.Intervals{Win(0, 1)}, 3, 1
			w.Schema, w.UpdatedAt = json.RawMessage(`{"v":1}`), clk.Now()
		}},
		{"Commit replayed", func() error {
			return s.Commit(ctx, "f1", state.Commit{BatchID: "b1", Window: Win(0, 1), Rows: 3, Schema: json.RawMessage(`{"v":9}`)})
		}, func(*state.StreamState) {}},
		{"Commit of a range known empty", func() error { return s.Commit(ctx, "f1", state.Commit{Window: Win(1, 2)}) },
			func(w *state.StreamState) {
				w.Committed = state.Intervals{Win(0, 2)}
				w.UpdatedAt = clk.Now()
			}},
		{"SetError", func() error { return s.SetError(ctx, "f1", "list submissions: 503") },
			func(w *state.StreamState) { w.LastError, w.UpdatedAt = "list submissions: 503", clk.Now() }},
		{"Commit without an intent counts, and is no success: the error stays", func() error {
			return s.Commit(ctx, "f1", state.Commit{BatchID: "b2", Window: Win(2, 3), Rows: 2})
		}, func(w *state.StreamState) {
			w.Committed, w.Rows, w.Batches = state.Intervals{Win(0, 3)}, 5, 2
			w.UpdatedAt = clk.Now()
		}},
		{"SetSucceeded records the success and clears the error", func() error { return s.SetSucceeded(ctx, "f1", H(5)) },
			func(w *state.StreamState) { w.LastSuccess, w.LastError, w.UpdatedAt = H(5), "", clk.Now() }},
		{"SetError cleared", func() error {
			if err := s.SetError(ctx, "f1", "x"); err != nil {
				return err
			}
			return s.SetError(ctx, "f1", "")
		}, func(w *state.StreamState) { w.UpdatedAt = clk.Now() }},
		{"SetSchema nil unpins", func() error { return s.SetSchema(ctx, "f1", nil) },
			func(w *state.StreamState) { w.Schema, w.UpdatedAt = nil, clk.Now() }},
		{"SetSchema pins", func() error { return s.SetSchema(ctx, "f1", json.RawMessage(`{"v":2}`)) },
			func(w *state.StreamState) { w.Schema, w.UpdatedAt = json.RawMessage(`{"v":2}`), clk.Now() }},
		{"reconcile intent and commit", func() error {
			if err := s.RecordIntent(ctx, "f1", state.Intent{BatchID: "r1", Table: "t1", Start: H(0), End: H(1), Reconcile: true, Counts: &state.ReconcileCounts{Versions: 2, Tombstones: 1}, CreatedAt: H(7)}); err != nil {
				return err
			}
			return s.Commit(ctx, "f1", state.Commit{BatchID: "r1", Window: Win(0, 1), Rows: 3, Reconcile: &state.ReconcileCounts{Versions: 2, Tombstones: 1}})
		}, func(w *state.StreamState) {
			w.Rows, w.Batches, w.ReconciledWindows, w.VersionsWritten, w.Tombstones = 8, 3, 1, 2, 1
			w.UpdatedAt = clk.Now()
		}},
		{"reconcile commit replayed", func() error {
			return s.Commit(ctx, "f1", state.Commit{BatchID: "r1", Window: Win(0, 1), Rows: 3, Reconcile: &state.ReconcileCounts{Versions: 2, Tombstones: 1}})
		}, func(*state.StreamState) {}},
		{"SetReconciled", func() error { return s.SetReconciled(ctx, "f1", H(3)) },
			func(w *state.StreamState) { w.Reconciled, w.UpdatedAt = H(3), clk.Now() }},
		{"Commit moves the generation and the index start forward", func() error {
			if err := s.Commit(ctx, "f1", state.Commit{Window: Win(5, 6), Generation: 4, IndexFrom: H(0)}); err != nil {
				return err
			}
			return s.Commit(ctx, "f1", state.Commit{Window: Win(6, 7), Generation: 2})
		}, func(w *state.StreamState) {
			w.Committed, w.Generation, w.IndexedFrom = state.Intervals{Win(0, 3), Win(5, 7)}, 4, H(0)
			w.UpdatedAt = clk.Now()
		}},
		{"Commit sets the index start and the reconcile time at once", func() error {
			return s.Commit(ctx, "f1", state.Commit{IndexFrom: H(1), Reconciled: H(9)})
		}, func(w *state.StreamState) {
			w.IndexedFrom, w.Reconciled, w.UpdatedAt = H(1), H(9), clk.Now()
		}},
		{"Uncommit", func() error { return s.Uncommit(ctx, "f1", H(1).Add(30*time.Minute)) },
			func(w *state.StreamState) {
				w.Committed, w.UpdatedAt = state.Intervals{{Start: H(0), End: H(1).Add(30 * time.Minute)}}, clk.Now()
			}},
		{"DropIntent", func() error {
			if err := s.RecordIntent(ctx, "f1", state.Intent{BatchID: "b3", Table: "t1", Start: H(3), End: H(4)}); err != nil {
				return err
			}
			if err := s.DropIntent(ctx, "f1", "b3"); err != nil {
				return err
			}
			return s.DropIntent(ctx, "f1", "never-recorded")
		}, func(w *state.StreamState) { w.UpdatedAt = clk.Now() }},
		{"BeginRefresh", func() error { return s.BeginRefresh(ctx, "f1", state.Refresh{Table: "t1"}) },
			func(w *state.StreamState) {
				w.Refresh, w.UpdatedAt = &state.Refresh{Table: "t1", RequestedAt: clk.Now()}, clk.Now()
			}},
		{"FinishRefresh", func() error { return s.FinishRefresh(ctx, "f1") },
			func(w *state.StreamState) { *w = state.StreamState{Key: "f1", Generation: 5, UpdatedAt: clk.Now()} }},
		{"Reset", func() error {
			if err := s.Commit(ctx, "f1", state.Commit{BatchID: "g5", Window: Win(0, 1), Rows: 1}); err != nil {
				return err
			}
			return s.Reset(ctx, "f1")
		}, func(w *state.StreamState) { *w = state.StreamState{Key: "f1", Generation: 6, UpdatedAt: clk.Now()} }},
		{"after the reset", func() error {
			return s.Commit(ctx, "f1", state.Commit{BatchID: "b1-g6", Window: Win(0, 1), Rows: 4})
		}, func(w *state.StreamState) {
			w.Committed, w.Rows, w.Batches, w.UpdatedAt = state.Intervals{Win(0, 1)}, 4, 1, clk.Now()
		}},
	}
	for _, st := range steps {
		clk.Add(time.Minute)
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		st.want(&want)
		same(t, st.name, get(t, s, "f1"), want)
	}
	// A second form; List orders by id.
	must(t, s.SetError(ctx, "e0", "first"))
	list, err := s.List(ctx)
	must(t, err)
	if len(list) != 2 || list[0].Key != "e0" || list[1].Key != "f1" {
		t.Fatalf("List = %v, want e0 and f1 in that order", ids(list))
	}
	same(t, "List's f1", list[1], want)
	must(t, s.Close())
	// Durable: a new store on the place reads the same.
	s = open(t, p, Options{Now: clk.Now})
	same(t, "f1 after a reopen", get(t, s, "f1"), want)
	if e0 := get(t, s, "e0"); e0.LastError != "first" {
		t.Fatalf("e0 after a reopen: %+v", e0)
	}
}

func ids(list []state.StreamState) []string {
	out := make([]string, len(list))
	for i, st := range list {
		out[i] = st.Key
	}
	return out
}

// testIndex: an intent's index change is applied by its Commit, not
// before; a Commit's own change replaces versions and removes the gone;
// Versions reads exactly [from, to) in time order; a dropped intent's
// change is never applied; a replay applies nothing; a reset forgets the
// index; each form has its own; many records (past a chunk) come back
// whole.
func testIndex(t *testing.T, p Place) {
	ctx := context.Background()
	clk := NewClock(H(1000))
	s := open(t, p, Options{Now: clk.Now})
	must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: "b1", Table: "t", Start: H(0), End: H(3),
		Index: &state.IndexChange{Put: []state.Entry{E("a", 0, 0), E("b", 1, 0), E("c", 2, 0)}}}))
	if got := indexMap(t, s, "f"); len(got) != 0 {
		t.Fatalf("an intent's index change is visible before its commit: %v", got)
	}
	must(t, s.Commit(ctx, "f", state.Commit{BatchID: "b1", Window: Win(0, 3), Rows: 3}))
	wantIdx := map[string]state.Version{"a": E("a", 0, 0).Version, "b": E("b", 1, 0).Version, "c": E("c", 2, 0).Version}
	checkIndex(t, s, "f", wantIdx, "after the commit of the intent's change")

	// An edit of a, a deletion of b, a late import d.
	c2 := &state.IndexChange{Put: []state.Entry{E("a", 0, 5), E("d", 3, 0)}, Gone: []state.Entry{E("b", 1, 0)}}
	must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: "b2", Table: "t", Start: H(0), End: H(3), Reconcile: true}))
	must(t, s.Commit(ctx, "f", state.Commit{BatchID: "b2", Window: Win(0, 3), Index: c2, Reconcile: &state.ReconcileCounts{Versions: 2, Tombstones: 1}}))
	delete(wantIdx, "b")
	wantIdx["a"], wantIdx["d"] = E("a", 0, 5).Version, E("d", 3, 0).Version
	checkIndex(t, s, "f", wantIdx, "after an edit, a deletion and an import")

	// A replay, even with another change, applies nothing.
	must(t, s.Commit(ctx, "f", state.Commit{BatchID: "b2", Window: Win(0, 3), Index: &state.IndexChange{Put: []state.Entry{E("z", 1, 0)}}, Reconcile: &state.ReconcileCounts{Versions: 1}}))
	checkIndex(t, s, "f", wantIdx, "after a replayed commit")

	// Versions reads exactly [from, to), in time order.
	for _, tc := range []struct {
		from, to int
		want     []string
	}{{0, 1, []string{"a"}}, {1, 3, []string{"c"}}, {0, 4, []string{"a", "c", "d"}}, {3, 4, []string{"d"}}, {4, 9, nil}, {1, 2, nil}} {
		var got []string
		for _, e := range index(t, s, "f", H(tc.from), H(tc.to)) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Versions([%d, %d)) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Versions(ctx, "f", all[0], all[1], func(state.Entry) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("Versions with fn failing at once: %d calls, %v; want 1 call and its error", n, err)
	}

	// A dropped intent's change is never applied, even by a commit of its id.
	must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: "b3", Table: "t", Start: H(4), End: H(5), Index: &state.IndexChange{Put: []state.Entry{E("e", 4, 0)}}}))
	must(t, s.DropIntent(ctx, "f", "b3"))
	must(t, s.Commit(ctx, "f", state.Commit{BatchID: "b3", Window: Win(4, 5)}))
	checkIndex(t, s, "f", wantIdx, "after a dropped intent's batch id was committed")

	// Another form's index is its own.
	must(t, s.Commit(ctx, "g", state.Commit{BatchID: "x", Window: Win(0, 1), Index: &state.IndexChange{Put: []state.Entry{E("a", 0, 9)}}}))
	checkIndex(t, s, "f", wantIdx, "after another form's commit")
	checkIndex(t, s, "g", map[string]state.Version{"a": E("a", 0, 9).Version}, "the other form")

	// Many records, edited and deleted at random, survive a reopen.
	seed := time.Now().UnixNano()
	t.Logf("index seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	big := &state.IndexChange{}
	bigWant := map[string]state.Version{}
	for i := range 3000 {
		e := state.Entry{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Version: state.Version{Time: H(10).Add(time.Duration(i) * time.Second), Hash: uint64(i)}}
		big.Put = append(big.Put, e)
		bigWant[e.ID] = e.Version
	}
	must(t, s.Commit(ctx, "big", state.Commit{BatchID: "b", Window: Win(10, 12), Index: big}))
	edit := &state.IndexChange{}
	for _, i := range r.Perm(len(big.Put))[:200] {
		e := big.Put[i]
		if r.IntN(2) == 0 {
			e.Hash += 1 << 40
			edit.Put = append(edit.Put, e)
			bigWant[e.ID] = e.Version
		} else {
			edit.Gone = append(edit.Gone, e)
			delete(bigWant, e.ID)
		}
	}
	must(t, s.RecordIntent(ctx, "big", state.Intent{BatchID: "r", Table: "t", Start: H(10), End: H(12), Reconcile: true}))
	must(t, s.Commit(ctx, "big", state.Commit{BatchID: "r", Window: Win(10, 12), Index: edit}))
	must(t, s.Close())
	s = open(t, p, Options{Now: clk.Now})
	checkIndex(t, s, "big", bigWant, "3000 records, edited and deleted at random, after a reopen")

	// A reset forgets the index.
	must(t, s.Reset(ctx, "f"))
	checkIndex(t, s, "f", map[string]state.Version{}, "after a reset")
}

func checkIndex(t *testing.T, s state.Store, form string, want map[string]state.Version, what string) {
	t.Helper()
	got := indexMap(t, s, form)
	if !maps.Equal(got, want) {
		t.Fatalf("%s: the index of %s holds %d records, want %d (%v, want %v)", what, form, len(got), len(want), abbrev(got), abbrev(want))
	}
	if st := get(t, s, form); st.Indexed != int64(len(want)) {
		t.Fatalf("%s: Indexed = %d, the index holds %d", what, st.Indexed, len(want))
	}
	prev := all[0]
	for _, e := range index(t, s, form, all[0], all[1]) {
		if e.Time.Before(prev) {
			t.Fatalf("%s: Versions is not in time order at %s", what, e.ID)
		}
		prev = e.Time
	}
}

func abbrev(m map[string]state.Version) string {
	if len(m) > 6 {
		return fmt.Sprintf("%d records", len(m))
	}
	return fmt.Sprint(m)
}

// testReplay: batches committed in a random order, each commit replayed a
// random number of times, interleaved: every counter counts each batch
// once and the committed windows and the index are their union.
func testReplay(t *testing.T, p Place) {
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("replay seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	s := open(t, p, Options{Now: NewClock(H(1000)).Now})
	const n = 12
	order := r.Perm(n)
	var rows int64
	wantIdx := map[string]state.Version{}
	commit := func(i int) state.Commit {
		e := E(fmt.Sprint("k", i), i, 0)
		return state.Commit{BatchID: fmt.Sprint("b", i), Window: Win(i, i+1), Rows: i + 1, Index: &state.IndexChange{Put: []state.Entry{e}}, Reconcile: &state.ReconcileCounts{Versions: 1}}
	}
	var done []int
	for _, i := range order {
		rows += int64(i + 1)
		wantIdx[fmt.Sprint("k", i)] = E("k", i, 0).Version
		must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: fmt.Sprint("b", i), Table: "t", Start: H(i), End: H(i + 1)}))
		must(t, s.Commit(ctx, "f", commit(i)))
		done = append(done, i)
		for range r.IntN(3) {
			must(t, s.Commit(ctx, "f", commit(done[r.IntN(len(done))])))
		}
	}
	st := get(t, s, "f")
	if st.Batches != n || st.Rows != rows || st.ReconciledWindows != n || st.VersionsWritten != n || len(st.Intents) != 0 {
		t.Fatalf("after %d batches and replays: batches %d, rows %d (want %d), reconciled windows %d, versions %d, intents %d",
			n, st.Batches, st.Rows, rows, st.ReconciledWindows, st.VersionsWritten, len(st.Intents))
	}
	if len(st.Committed) != 1 || !st.Committed[0].Start.Equal(H(0)) || !st.Committed[0].End.Equal(H(n)) {
		t.Fatalf("committed %v, want [%s, %s)", st.Committed, H(0), H(n))
	}
	checkIndex(t, s, "f", wantIdx, "after replays")
}

// testLayout: a table's layout is recorded by its first intent that names
// one, an intent naming another is refused, a commit records one only
// where none is, a reset keeps it (the files stay) and a refresh, which
// removes them, forgets it.
func testLayout(t *testing.T, p Place) {
	ctx := context.Background()
	s := open(t, p, Options{Now: NewClock(H(1000)).Now})
	must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: "b0", Table: "t", Start: H(0), End: H(1), Layout: "month"}))
	if got := get(t, s, "f").Layout; got != "month" {
		t.Fatalf("after the first intent: layout %q, want month", got)
	}
	if err := s.RecordIntent(ctx, "f", state.Intent{BatchID: "b1", Table: "t", Start: H(1), End: H(2), Layout: "day"}); err == nil {
		t.Fatal("an intent of another layout was recorded")
	}
	if _, open := get(t, s, "f").Intents["b1"]; open {
		t.Fatal("the refused intent is open")
	}
	must(t, s.Commit(ctx, "f", state.Commit{BatchID: "b0", Window: Win(0, 1), Rows: 1, Layout: "day"}))
	if got := get(t, s, "f").Layout; got != "month" {
		t.Fatalf("a commit naming another layout changed it to %q", got)
	}
	must(t, s.Reset(ctx, "f"))
	if got := get(t, s, "f").Layout; got != "month" {
		t.Fatalf("after a reset: layout %q, want month (the files stay)", got)
	}
	must(t, s.BeginRefresh(ctx, "f", state.Refresh{Table: "t"}))
	must(t, s.FinishRefresh(ctx, "f"))
	if got := get(t, s, "f").Layout; got != "" {
		t.Fatalf("after a refresh: layout %q, want none recorded", got)
	}
	// A table written before layouts were recorded gets one with its
	// next commit, of a batch or of an empty range.
	must(t, s.Commit(ctx, "g", state.Commit{Window: Win(0, 1)}))
	must(t, s.Commit(ctx, "g", state.Commit{Window: Win(1, 2), Layout: "day"}))
	if got := get(t, s, "g").Layout; got != "day" {
		t.Fatalf("a legacy table's commit: layout %q, want day", got)
	}
}

// testRefusals: a write the store must refuse fails and changes nothing.
func testRefusals(t *testing.T, p Place) {
	ctx := context.Background()
	clk := NewClock(H(1000))
	s := open(t, p, Options{Now: clk.Now})
	must(t, s.RecordIntent(ctx, "f", state.Intent{BatchID: "open", Table: "t", Start: H(0), End: H(1)}))
	must(t, s.Commit(ctx, "f", state.Commit{Window: Win(2, 3)}))
	before := get(t, s, "f")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		do   func() error
	}{
		{"an intent without batch id", func() error { return s.RecordIntent(ctx, "f", state.Intent{Start: H(0), End: H(1)}) }},
		{"an intent ending before it starts", func() error {
			return s.RecordIntent(ctx, "f", state.Intent{BatchID: "x", Start: H(1), End: H(0)})
		}},
		{"an intent of negative rows", func() error {
			return s.RecordIntent(ctx, "f", state.Intent{BatchID: "x", Start: H(0), End: H(1), Rows: -1})
		}},
		{"a commit ending before it starts", func() error { return s.Commit(ctx, "f", state.Commit{Window: state.Interval{Start: H(5), End: H(4)}}) }},
		{"a commit of negative rows", func() error { return s.Commit(ctx, "f", state.Commit{Window: Win(5, 6), Rows: -1}) }},
		{"a commit of a schema that is not JSON", func() error {
			return s.Commit(ctx, "f", state.Commit{Window: Win(5, 6), Schema: json.RawMessage(`{`)})
		}},
		{"a schema that is not JSON", func() error { return s.SetSchema(ctx, "f", json.RawMessage(`{`)) }},
		{"a refresh without table", func() error { return s.BeginRefresh(ctx, "f", state.Refresh{}) }},
		{"a refresh with a batch open", func() error { return s.BeginRefresh(ctx, "f", state.Refresh{Table: "t"}) }},
		{"an uncommit with a batch open", func() error { return s.Uncommit(ctx, "f", H(0)) }},
		{"an empty form id", func() error { return s.SetError(ctx, "", "x") }},
		{"a cancelled context", func() error { return s.SetError(cancelled, "f", "x") }},
		{"a cancelled context (commit)", func() error { return s.Commit(cancelled, "f", state.Commit{Window: Win(7, 8)}) }},
		{"a secret without a name", func() error { return s.PutSecret(ctx, "", []byte("x")) }},
	}
	for _, tc := range cases {
		clk.Add(time.Minute)
		if err := tc.do(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
		same(t, "after "+tc.name, get(t, s, "f"), before)
	}
	if _, err := s.Get(cancelled, "f"); err == nil {
		t.Errorf("Get with a cancelled context succeeded")
	}
}

// testSecrets: GetSecret/PutSecret, a nil value deletes, values are
// copies, and they are durable.
func testSecrets(t *testing.T, p Place) {
	ctx := context.Background()
	s := open(t, p, Options{Now: NewClock(H(1000)).Now})
	secret := func(name string) []byte {
		t.Helper()
		v, err := s.GetSecret(ctx, name)
		must(t, err)
		return v
	}
	if v := secret("scheduling/refresh_token"); v != nil {
		t.Fatalf("a secret never stored reads %q, want nil", v)
	}
	val := []byte("tok-1")
	must(t, s.PutSecret(ctx, "scheduling/refresh_token", val))
	val[0] = 'X' // the store keeps its own copy
	if v := secret("scheduling/refresh_token"); string(v) != "tok-1" {
		t.Fatalf("secret = %q, want tok-1", v)
	}
	got := secret("scheduling/refresh_token")
	got[0] = 'Y'
	must(t, s.PutSecret(ctx, "scheduling/refresh_token", []byte("tok-2")))
	must(t, s.PutSecret(ctx, "other", []byte("o")))
	must(t, s.PutSecret(ctx, "gone", []byte("g")))
	must(t, s.PutSecret(ctx, "gone", nil))
	must(t, s.PutSecret(ctx, "never", nil))
	if v := secret("gone"); v != nil {
		t.Fatalf("a deleted secret reads %q", v)
	}
	// Secrets are no form: List does not show them.
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after storing secrets = %v, %v", ids(list), err)
	}
	must(t, s.Close())
	s = open(t, p, Options{Now: NewClock(H(1000)).Now})
	for name, want := range map[string]string{"scheduling/refresh_token": "tok-2", "other": "o"} {
		if v := secret(name); string(v) != want {
			t.Errorf("after a reopen, secret %s = %q, want %q", name, v, want)
		}
	}
	if v := secret("gone"); v != nil {
		t.Errorf("after a reopen, the deleted secret reads %q", v)
	}
}

// testReadOnly: a read-only store reads what a writer wrote and refuses
// every write with state.ErrReadOnly; on an empty place it reads empty.
func testReadOnly(t *testing.T, p Place) {
	ctx := context.Background()
	ro := open(t, p, Options{ReadOnly: true, Now: NewClock(H(1000)).Now})
	if list, err := ro.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("a read-only store on an empty place lists %v, %v", ids(list), err)
	}
	must(t, ro.Close())
	w := open(t, p, Options{Now: NewClock(H(1000)).Now})
	must(t, w.Commit(ctx, "f", state.Commit{BatchID: "b", Window: Win(0, 1), Rows: 2, Index: &state.IndexChange{Put: []state.Entry{E("a", 0, 0)}}}))
	must(t, w.PutSecret(ctx, "s", []byte("v")))
	want := get(t, w, "f")
	must(t, w.Close())
	ro = open(t, p, Options{ReadOnly: true, Now: NewClock(H(2000)).Now})
	same(t, "read-only Get", get(t, ro, "f"), want)
	checkIndex(t, ro, "f", map[string]state.Version{"a": E("a", 0, 0).Version}, "read-only")
	if v, err := ro.GetSecret(ctx, "s"); err != nil || string(v) != "v" {
		t.Errorf("read-only GetSecret = %q, %v", v, err)
	}
	writes := map[string]func() error{
		"RecordIntent":  func() error { return ro.RecordIntent(ctx, "f", state.Intent{BatchID: "x", Start: H(1), End: H(2)}) },
		"Commit":        func() error { return ro.Commit(ctx, "f", state.Commit{Window: Win(1, 2)}) },
		"DropIntent":    func() error { return ro.DropIntent(ctx, "f", "x") },
		"SetSchema":     func() error { return ro.SetSchema(ctx, "f", nil) },
		"SetError":      func() error { return ro.SetError(ctx, "f", "x") },
		"SetSucceeded":  func() error { return ro.SetSucceeded(ctx, "f", H(1)) },
		"Reset":         func() error { return ro.Reset(ctx, "f") },
		"Uncommit":      func() error { return ro.Uncommit(ctx, "f", H(0)) },
		"BeginRefresh":  func() error { return ro.BeginRefresh(ctx, "f", state.Refresh{Table: "t"}) },
		"FinishRefresh": func() error { return ro.FinishRefresh(ctx, "f") },
		"SetReconciled": func() error { return ro.SetReconciled(ctx, "f", H(1)) },
		"PutSecret":     func() error { return ro.PutSecret(ctx, "s", nil) },
	}
	for _, name := range slices.Sorted(maps.Keys(writes)) {
		if err := writes[name](); !errors.Is(err, state.ErrReadOnly) {
			t.Errorf("read-only %s: %v, want state.ErrReadOnly", name, err)
		}
	}
	same(t, "after refused writes", get(t, ro, "f"), want)
}

// testSecondWriter: a second writer on a place held by one is refused with
// a *state.LockedError; once the first closes, the next opens and reads
// what it wrote.
func testSecondWriter(t *testing.T, p Place) {
	ctx := context.Background()
	clk := NewClock(H(1000))
	a := open(t, p, Options{Now: clk.Now})
	must(t, a.SetError(ctx, "f", "from a"))
	_, err := p.Open(ctx, Options{Now: clk.Now, LeaseTTL: longLease})
	var le *state.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("a second writer while the first is open: %v, want a *state.LockedError", err)
	}
	must(t, a.Close())
	b := open(t, p, Options{Now: clk.Now})
	if st := get(t, b, "f"); st.LastError != "from a" {
		t.Fatalf("the next writer reads %+v", st)
	}
}

// testLease: for a store with a lease, a second writer is refused while
// the lease runs, takes it over once it expired (by its own clock), and
// the first writer, whose clock says its lease still runs, then loses the
// compare-and-swap: its write fails with a *state.ConflictError, every
// later one too, and the new holder's state stands; the first writer's
// Close leaves the new holder's lease alone.
func testLease(t *testing.T, newPlace func(t *testing.T) Place) {
	ctx := context.Background()
	p := newPlace(t)
	ttl := time.Hour // no renewal ticks during the test: clocks move by hand
	clkA := NewClock(H(0))
	a := open(t, p, Options{Now: clkA.Now, LeaseTTL: ttl})
	if _, ok := a.(state.Leased); !ok {
		t.Logf("%T holds no lease: the lease and compare-and-swap cases do not apply (its second writer is refused by SecondWriter)", a)
		return
	}
	must(t, a.SetError(ctx, "f", "from a"))
	_, err := p.Open(ctx, Options{Now: clkA.Now, LeaseTTL: ttl})
	var le *state.LockedError
	if !errors.As(err, &le) || le.LeaseExpires.IsZero() {
		t.Fatalf("a second writer while the lease runs: %v, want a *state.LockedError with the lease's expiry", err)
	}
	clkB := NewClock(H(0).Add(2 * ttl))
	b, err := p.Open(ctx, Options{Now: clkB.Now, LeaseTTL: ttl})
	if err != nil {
		t.Fatalf("take over an expired lease: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if st := get(t, b, "f"); st.LastError != "from a" {
		t.Fatalf("the new holder reads %+v", st)
	}
	must(t, b.SetError(ctx, "f", "from b"))
	var ce *state.ConflictError
	if err := a.SetError(ctx, "f", "late a"); !errors.As(err, &ce) {
		t.Fatalf("the old holder's write after the takeover: %v, want a *state.ConflictError", err)
	}
	if err := a.SetError(ctx, "other", "x"); err == nil {
		t.Fatalf("the old holder wrote after losing the compare-and-swap")
	}
	must(t, b.Commit(ctx, "f", state.Commit{BatchID: "b", Window: Win(0, 1), Rows: 1}))
	a.Close()
	if _, err := p.Open(ctx, Options{Now: clkB.Now, LeaseTTL: ttl}); !errors.As(err, &le) {
		t.Fatalf("after the old holder closed, the new holder's lease is gone: %v", err)
	}
	ro := open(t, p, Options{ReadOnly: true, Now: clkB.Now})
	if st := get(t, ro, "f"); st.LastError != "from b" || st.Batches != 1 {
		t.Fatalf("the state after the race: %+v, want b's error and commit", st)
	}
	if st := get(t, ro, "other"); st.LastError != "" {
		t.Fatalf("the old holder's write landed: %+v", st)
	}
}

// testDamage: one bit flipped in one form's record is reported as damage
// of that form only: its Get and its writes fail with a *state.CorruptError
// naming it, List marks it, the other form reads and writes as before, and
// a Reset replaces the record with an empty one of a later generation.
func testDamage(t *testing.T, p Place) {
	ctx := context.Background()
	clk := NewClock(H(1000))
	s := open(t, p, Options{Now: clk.Now})
	for _, id := range []string{"f1", "f2"} {
		must(t, s.RecordIntent(ctx, id, state.Intent{BatchID: "b", Table: "t", Start: H(0), End: H(1)}))
		must(t, s.Commit(ctx, id, state.Commit{BatchID: "b", Window: Win(0, 1), Rows: 3}))
	}
	f2 := get(t, s, "f2")
	must(t, s.Close())
	p.Damage(t, "f1")
	s, err := p.Open(ctx, Options{Now: clk.Now, LeaseTTL: longLease})
	if err != nil {
		t.Fatalf("one damaged record failed the whole store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	st, err := s.Get(ctx, "f1")
	if !isCorrupt(err, "f1") {
		t.Fatalf("Get of the damaged record: %+v, %v; want a *state.CorruptError naming f1", st, err)
	}
	if err := s.Commit(ctx, "f1", state.Commit{Window: Win(5, 6)}); !isCorrupt(err, "f1") {
		t.Errorf("a commit over the damaged record: %v, want the damage", err)
	}
	same(t, "the other form", get(t, s, "f2"), f2)
	must(t, s.Commit(ctx, "f2", state.Commit{Window: Win(1, 2)}))
	list, err := s.List(ctx)
	must(t, err)
	for _, fs := range list {
		if (fs.Damaged != "") != (fs.Key == "f1") {
			t.Errorf("List: %s damaged=%q", fs.Key, fs.Damaged)
		}
	}
	must(t, s.Reset(ctx, "f1"))
	if st := get(t, s, "f1"); len(st.Committed) != 0 || st.Generation < 1 {
		t.Fatalf("after a reset of the damaged record: %+v", st)
	}
}

// testMigration: the fixture of the format before 3 reads as it is and
// the first writer migrates it: form-a keeps its 41 records, its open
// reconcile batch keeps its counts and commits with the change its intent
// carried, form-b and the secret are as they were.
func testMigration(t *testing.T, p Place) {
	ctx := context.Background()
	fx := LoadFixture(t)
	p.Seed(t)
	ro := open(t, p, Options{ReadOnly: true, Now: time.Now})
	a := get(t, ro, "form-a")
	if a.Rows != 41 || len(a.Intents) != 1 {
		t.Fatalf("a reader of the fixture reads form-a as %+v", a)
	}
	if got := indexMap(t, ro, "form-a"); !maps.Equal(got, fx.Index) {
		t.Errorf("a reader of the fixture reads %d records of form-a's index (its Get says Indexed %d), want its %d", len(got), a.Indexed, len(fx.Index))
	}
	must(t, ro.Close())

	w := open(t, p, Options{Now: time.Now})
	a = get(t, w, "form-a")
	if a.Rows != 41 || a.IndexedFrom.IsZero() || len(a.Schema) == 0 || len(a.Intents) != 1 {
		t.Fatalf("form-a after the migration: %+v", a)
	}
	if c := a.Intents[fx.OpenBatch].Counts; c == nil || *c != fx.OpenCounts {
		t.Errorf("the open reconcile batch's counts after the migration: %+v, want %+v", c, fx.OpenCounts)
	}
	checkIndex(t, w, "form-a", fx.Index, "form-a after the migration")
	if b := get(t, w, "form-b"); len(b.Committed) != 1 || b.Indexed != 0 {
		t.Errorf("form-b after the migration: %+v", b)
	}
	if v, err := w.GetSecret(ctx, "scheduling/refresh_token"); err != nil || !bytes.Equal(v, []byte("tok")) {
		t.Errorf("the secret after the migration: %q, %v", v, err)
	}
	must(t, w.Commit(ctx, "form-a", state.Commit{BatchID: fx.OpenBatch, Window: a.Committed[0], Reconcile: &fx.OpenCounts}))
	checkIndex(t, w, "form-a", fx.After, "form-a after its open batch committed")
	must(t, w.Close())
	ro = open(t, p, Options{ReadOnly: true, Now: time.Now})
	checkIndex(t, ro, "form-a", fx.After, "a reader of the migrated state")
}
