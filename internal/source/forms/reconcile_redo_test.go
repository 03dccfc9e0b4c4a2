package forms

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// rowSink keeps every row committed (id, last_updated_at, _synced_at,
// _deleted), once per batch id, and can fail commits.
type rowSink struct {
	mu      sync.Mutex
	fail    bool
	batches map[string]bool
	rows    []outRow
}

type outRow struct {
	batch           string
	id              string
	updated, synced time.Time
	deleted         bool
}

// Commit gathers the batch's parts into one record.
func (s *rowSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	return sink.WithGathered(parts, func(rec arrow.Record) error { return s.commitRecord(ctx, b, rec) })
}

func (s *rowSink) commitRecord(_ context.Context, b sink.Batch, rec arrow.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("sink unavailable")
	}
	if s.batches[b.ID] {
		return nil
	}
	s.batches[b.ID] = true
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	ids := col("submission_id").(*array.String)
	upd := col("last_updated_at").(*array.Timestamp)
	syn := col("_synced_at").(*array.Timestamp)
	var del *array.Boolean
	if idx := rec.Schema().FieldIndices("_deleted"); len(idx) == 1 {
		del = rec.Column(idx[0]).(*array.Boolean)
	}
	for i := 0; i < ids.Len(); i++ {
		r := outRow{batch: b.ID, id: strings.Clone(ids.Value(i)), synced: syn.Value(i).ToTime(arrow.Microsecond)}
		if upd.IsValid(i) {
			r.updated = upd.Value(i).ToTime(arrow.Microsecond)
		}
		r.deleted = del != nil && del.IsValid(i) && del.Value(i)
		s.rows = append(s.rows, r)
	}
	return nil
}

func (s *rowSink) Committed(_ context.Context, b sink.Batch) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[b.ID], nil
}
func (s *rowSink) Close() error { return nil }

// latest is the README's current state: per submission the row with the
// greatest (last_updated_at, _synced_at), tombstones dropped.
func (s *rowSink) latest() map[string]outRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := map[string]outRow{}
	for _, r := range s.rows {
		b, ok := best[r.id]
		if !ok || r.updated.After(b.updated) || r.updated.Equal(b.updated) && r.synced.After(b.synced) {
			best[r.id] = r
		}
	}
	for id, r := range best {
		if r.deleted {
			delete(best, id)
		}
	}
	return best
}

func (s *rowSink) rowsOf(id string) []outRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outRow
	for _, r := range s.rows {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type redoRig struct {
	sim   *testkit.Sim
	form  string
	store *state.Bolt
	snk   *rowSink
	clk   *clock
	p     *poller.Poller
	s     *Stream
}

func newRedoRig(t *testing.T, subs int) *redoRig {
	t.Helper()
	clk := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	sim := testkit.StartSim(t, formsim.Config{Seed: 7, Forms: 1, Submissions: subs,
		Start: clk.Now().AddDate(0, 0, -10), End: clk.Now().Add(-time.Hour), Now: clk.Now})
	client, err := api.New(api.Config{BaseURL: sim.BaseURL, APIKey: testkit.APIKey, RateLimit: 1000, Burst: 100, MaxAttempts: 2,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	snk := &rowSink{batches: map[string]bool{}}
	form := sim.FormIDs()[0]
	p := poller.New(snk, store, poller.Options{SafetyLag: time.Minute, Lookback: 30 * 24 * time.Hour, ReconcileEvery: 0,
		MaxRowsPerBatch: 50000, Now: clk.Now})
	return &redoRig{sim: sim, form: form, store: store, snk: snk, clk: clk, p: p, s: NewStream(client, form, "", StreamOptions{})}
}

func (r *redoRig) sync(t *testing.T) poller.Result {
	t.Helper()
	r.clk.Add(time.Minute)
	return r.p.Sync(context.Background(), r.s, time.Time{})
}

func (r *redoRig) intents(t *testing.T) []string {
	t.Helper()
	st, err := r.store.Get(context.Background(), r.form)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for id := range st.Intents {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// A reconcile batch whose sink commit failed is redone by the next pass
// under its own id. When what it found has gone meanwhile (a late import
// deleted again), the redo finds no change: it must still clear the
// intent, or the intent stays open for good and every later pass reads its
// window again.
func TestReconcileRedoWithNothingLeftClearsItsIntent(t *testing.T) {
	r := newRedoRig(t, 300)
	if res := r.sync(t); res.Err != nil {
		t.Fatal(res.Err)
	}
	// A late import into the committed history.
	late, err := r.sim.Insert(r.form, r.clk.Now().AddDate(0, 0, -5))
	if err != nil {
		t.Fatal(err)
	}
	r.snk.fail = true
	res := r.sync(t)
	t.Logf("pass with the sink down: versions=%d err=%v", res.Versions, res.Err)
	if res.Err == nil {
		t.Fatal("the pass with the sink down succeeded")
	}
	t.Logf("open intents after the failed pass: %v", r.intents(t))
	r.snk.fail = false
	// The import is deleted again before the next pass.
	if err := r.sim.Delete(r.form, late[0]); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		res := r.sync(t)
		t.Logf("pass %d: err=%v recovered=%d reconciled windows=%d versions=%d tombstones=%d requests=%d", i+1, res.Err, res.Recovered, res.ReconciledWindows, res.Versions, res.Tombstones, res.Requests)
	}
	if open := r.intents(t); len(open) > 0 {
		t.Errorf("after three successful passes the state still holds open intents %v", open)
	}
}

// hookAPI calls before ahead of every list request.
type hookAPI struct {
	API
	before func(p api.ListParams)
}

func (h *hookAPI) ListSubmissions(ctx context.Context, formID string, p api.ListParams) (*api.SubmissionPage, error) {
	if h.before != nil {
		h.before(p)
	}
	return h.API.ListSubmissions(ctx, formID, p)
}

// A reconcile intent left open would keep the time its first attempt began
// as its tombstones' last_updated_at. A submission of its window edited
// during a later pass (after the redo read the window, before that pass's
// reconcile did), then deleted, would get a tombstone that ranks below the
// edit in the latest view, and the index would forget it: it would stay in
// the current state for good. The deleted submission must leave the latest
// view.
func TestDeletionAfterAStuckReconcileRedoLeavesTheLatestView(t *testing.T) {
	r := newRedoRig(t, 300)
	hook := &hookAPI{API: r.s.api}
	r.s.api = hook
	if res := r.sync(t); res.Err != nil {
		t.Fatal(res.Err)
	}
	late, err := r.sim.Insert(r.form, r.clk.Now().AddDate(0, 0, -5))
	if err != nil {
		t.Fatal(err)
	}
	r.snk.fail = true
	if res := r.sync(t); res.Err == nil {
		t.Fatal("the pass with the sink down succeeded")
	}
	r.snk.fail = false
	if err := r.sim.Delete(r.form, late[0]); err != nil {
		t.Fatal(err)
	}
	// X: a submission of the open batch's window.
	x := r.sim.ExpectedIDsBetween(r.form, r.clk.Now().AddDate(0, 0, -3), r.clk.Now().AddDate(0, 0, -2))[0]
	// A person edits X while the next pass runs, after its redo.
	armed := true
	hook.before = func(p api.ListParams) {
		if armed && p.AfterDate != nil && p.AfterDate.After(r.clk.Now().Add(-2*time.Hour)) {
			armed = false
			r.clk.Add(time.Minute)
			if err := r.sim.Edit(r.form, x); err != nil {
				t.Error(err)
			}
		}
	}
	res := r.sync(t)
	t.Logf("pass with the edit: err=%v versions=%d tombstones=%d open intents=%v", res.Err, res.Versions, res.Tombstones, r.intents(t))
	// X is deleted.
	r.clk.Add(time.Hour)
	if err := r.sim.Delete(r.form, x); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		r.clk.Add(25 * time.Hour)
		res := r.sync(t)
		t.Logf("pass after the deletion: err=%v recovered=%d versions=%d tombstones=%d open intents=%v", res.Err, res.Recovered, res.Versions, res.Tombstones, r.intents(t))
	}
	for _, row := range r.snk.rowsOf(x) {
		t.Logf("row of X: batch=%s last_updated_at=%s _synced_at=%s deleted=%v", row.batch, row.updated.Format(time.RFC3339), row.synced.Format(time.RFC3339), row.deleted)
	}
	if v, ok := r.snk.latest()[x]; ok {
		t.Errorf("submission %s was deleted, but the latest view still holds it (its row of batch %s)", x, v.batch)
	}
	if got := indexed(t, r.store, r.form); got[x] != (state.Version{}) {
		t.Logf("index still holds X")
	} else {
		t.Logf("the version index no longer holds X: no later reconcile will write it again")
	}
}

// Exactly once over small windows, both readings of the date bounds.
func TestSmallWindowsExactlyOnce(t *testing.T) {
	for _, incl := range []bool{false, true} {
		for _, maxRows := range []int{1, 7, 40, 149, 151} {
			clk := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
			sim := testkit.StartSim(t, formsim.Config{Seed: int64(maxRows), Forms: 1, Submissions: 700, InclusiveDates: incl,
				Start: clk.Now().AddDate(0, 0, -3), End: clk.Now().Add(-time.Hour), Now: clk.Now})
			client, _ := api.New(api.Config{BaseURL: sim.BaseURL, APIKey: testkit.APIKey, RateLimit: 1000, Burst: 100, MaxAttempts: 2,
				MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 5 * time.Second})
			store, _ := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
			snk := &rowSink{batches: map[string]bool{}}
			form := sim.FormIDs()[0]
			p := poller.New(snk, store, poller.Options{SafetyLag: time.Minute, MaxRowsPerBatch: maxRows, Now: clk.Now})
			s := NewStream(client, form, "", StreamOptions{})
			res := p.Backfill(context.Background(), s, time.Time{}, clk.Now(), 2, nil)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			counts := map[string]int{}
			for _, r := range snk.rows {
				counts[r.id]++
			}
			want := sim.ExpectedIDs(form)
			missing, dup := 0, 0
			for _, id := range want {
				if counts[id] == 0 {
					missing++
				}
			}
			for _, n := range counts {
				if n > 1 {
					dup++
				}
			}
			if missing > 0 || dup > 0 || len(counts) != len(want) {
				t.Errorf("inclusive=%v maxRows=%d: %d missing, %d duplicated, %d ids written, want %d", incl, maxRows, missing, dup, len(counts), len(want))
			}
			store.Close()
		}
	}
}

// A reconcile under deletions and imports while it pages: no tombstone for
// a submission the service still lists.
func TestReconcileUnderChurnTombstonesOnlyDeleted(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		r := newRedoRig(t, 900)
		if res := r.sync(t); res.Err != nil {
			t.Fatal(res.Err)
		}
		r.sim.SetFaults(formsim.Faults{DeletesPerPage: int(seed%3) + 2, BackdatedPerPage: int(seed % 2)})
		res := r.sync(t)
		r.sim.SetFaults(formsim.Faults{})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		live := map[string]bool{}
		for _, id := range r.sim.ExpectedIDs(r.form) {
			live[id] = true
		}
		bad := 0
		for _, row := range r.snk.rows {
			if row.deleted && live[row.id] {
				bad++
			}
		}
		t.Logf("seed %d: versions=%d tombstones=%d, tombstones of live submissions=%d", seed, res.Versions, res.Tombstones, bad)
		if bad > 0 {
			t.Errorf("seed %d: %d tombstones of submissions still listed", seed, bad)
		}
	}
}
