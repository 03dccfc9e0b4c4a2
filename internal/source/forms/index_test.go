package forms

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// heldSink is a memSink that already holds the batches named in held.
type heldSink struct {
	*memSink
	held map[string]bool
}

func (s *heldSink) Committed(_ context.Context, b sink.Batch) (bool, error) { return s.held[b.ID], nil }

func openStore(t *testing.T) *state.Bolt {
	t.Helper()
	store, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func indexed(t *testing.T, store state.Store, form string) map[string]state.Version {
	t.Helper()
	got := map[string]state.Version{}
	err := store.Versions(context.Background(), form, epoch, time.Now().AddDate(10, 0, 0), func(e state.Entry) error {
		got[e.ID] = e.Version
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Every committed batch records all its rows in the index, whatever
// sync.lookback is, so a reconcile reaches back to the form's start; a form
// whose index starts later (kept for the lookback only by an older syncd)
// refuses a reconcile before that with an error naming the way out.
func TestIndexCoversTheWholeHistory(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &memSource{}
	for d := 0; d < 360; d += 9 {
		src.add(day0.AddDate(0, 0, d), day0.AddDate(0, 0, d).Add(time.Hour))
	}
	now := day0.AddDate(1, 0, 0)
	cases := []struct {
		name      string
		indexFrom time.Time // set before the first pass; zero: a new form
		from      time.Time // of the reconcile
		wantErr   string
	}{
		{"a new form reconciles from its start", time.Time{}, day0, ""},
		{"a migrated form reconciles from where its index starts", day0.AddDate(0, 11, 0), day0.AddDate(0, 11, 0), ""},
		{"a migrated form refuses earlier", day0.AddDate(0, 11, 0), day0, "syncd state adopt fIdx"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := openStore(t)
			const form = "fIdx"
			if !c.indexFrom.IsZero() {
				if err := store.Commit(ctx, form, state.Commit{IndexFrom: c.indexFrom}); err != nil {
					t.Fatal(err)
				}
			}
			p := newTestPoller(src, &memSink{rows: map[string]int{}}, store, poller.Options{SafetyLag: time.Nanosecond, Lookback: 30 * 24 * time.Hour, ReconcileEvery: 24 * time.Hour, MaxRowsPerBatch: 7, Now: func() time.Time { return now }})
			job := poller.Job{Stream: form, Start: day0}
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			st, err := store.Get(ctx, form)
			if err != nil {
				t.Fatal(err)
			}
			if got := indexed(t, store, form); len(got) != len(src.subs) || st.Indexed != int64(len(src.subs)) {
				t.Fatalf("the index holds %d records (Indexed %d), want all %d", len(got), st.Indexed, len(src.subs))
			}
			res := p.Reconcile(ctx, job, c.from)
			var noIndex *poller.ErrNoIndex
			switch {
			case c.wantErr == "" && res.Err != nil:
				t.Fatalf("reconcile from %s: %v", c.from, res.Err)
			case c.wantErr != "" && (!errors.As(res.Err, &noIndex) || !strings.Contains(res.Err.Error(), c.wantErr)):
				t.Fatalf("reconcile from %s: %v, want an ErrNoIndex naming %q", c.from, res.Err, c.wantErr)
			case c.wantErr == "" && (res.Versions != 0 || res.Tombstones != 0):
				t.Errorf("a reconcile with nothing changed wrote %d versions and %d tombstones", res.Versions, res.Tombstones)
			}
		})
	}
}

// A batch found in the sink after a stop is committed with the index
// change its intent recorded, and its reconcile counts.
func TestRecoveredBatchCommitsItsIndexChange(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	store := openStore(t)
	const form = "fPending"
	w := state.Interval{Start: day0, End: day0.Add(3 * time.Hour)}
	if err := store.Commit(ctx, form, state.Commit{IndexFrom: epoch, Window: w}); err != nil {
		t.Fatal(err)
	}
	change := &state.IndexChange{Put: []state.Entry{
		{ID: "a", Version: state.Version{Time: day0.Add(time.Hour), Hash: 1}},
		{ID: "b", Version: state.Version{Time: day0.Add(2 * time.Hour), Hash: 2}},
	}}
	in := state.Intent{BatchID: "stopped-r1", Table: "form_fpending", Start: w.Start, End: w.End, CreatedAt: day0, Reconcile: true,
		Index: change, Counts: &state.ReconcileCounts{Versions: 2}}
	if err := store.RecordIntent(ctx, form, in); err != nil {
		t.Fatal(err)
	}
	if got := indexed(t, store, form); len(got) != 0 {
		t.Fatalf("the intent changed the index: %v", got)
	}
	snk := &heldSink{memSink: &memSink{rows: map[string]int{}}, held: map[string]bool{"stopped-r1": true}}
	p := newTestPoller(&memSource{}, snk, store, poller.Options{SafetyLag: time.Nanosecond, Now: func() time.Time { return day0.Add(4 * time.Hour) }})
	if res := p.Sync(ctx, poller.Job{Stream: form, Start: day0}); res.Err != nil || res.Recovered != 1 {
		t.Fatalf("pass: recovered %d, %v", res.Recovered, res.Err)
	}
	got := indexed(t, store, form)
	if len(got) != 2 || got["a"].Hash != 1 || got["b"].Hash != 2 {
		t.Fatalf("after the recovery the index holds %v", got)
	}
	if st, _ := store.Get(ctx, form); st.VersionsWritten != 2 || len(st.Intents) != 0 {
		t.Errorf("after the recovery: %d versions written, intents %v", st.VersionsWritten, st.Intents)
	}
}
