package forms

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
)

// failingSource fails every list call while fail is set.
type failingSource struct {
	*memSource
	fail bool
}

func (f *failingSource) ListSubmissions(ctx context.Context, id string, p api.ListParams) (*api.SubmissionPage, error) {
	if f.fail {
		return nil, errors.New("service down")
	}
	return f.memSource.ListSubmissions(ctx, id, p)
}

// An open batch that the sink does not hold is fetched again under its own
// batch id, before anything else, and never dropped: a commit the stopped
// run had sent (a load job inserted just before a kill) may still land, and
// only the same id lets the sink tell the two apart. Re-planning would give
// the window a new id, and such a late commit would load its rows twice.
func TestOpenBatchIsRetriedUnderItsOwnID(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	src := &failingSource{memSource: &memSource{}}
	src.add(day0.Add(time.Hour), day0.Add(2*time.Hour), day0.Add(30*time.Hour))
	store, err := state.OpenBolt(ctx, state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The stopped run had planned [day0, day0+3h) while "now" was day0+3h.
	const form = "fRecover"
	open := state.Intent{BatchID: poller.BatchID(form, day0, day0.Add(3*time.Hour)), Table: "form_frecover",
		Start: day0, End: day0.Add(3 * time.Hour), CreatedAt: day0}
	if err := store.RecordIntent(ctx, form, open); err != nil {
		t.Fatal(err)
	}
	mem := &memSink{rows: map[string]int{}}
	now := day0.AddDate(0, 0, 2)
	p := newTestPoller(src, mem, store, poller.Options{SafetyLag: time.Nanosecond, Now: func() time.Time { return now }})
	job := poller.Job{Stream: form, Start: day0}

	// While the service fails, the intent survives the failed pass.
	src.fail = true
	if res := p.Sync(ctx, job); res.Err == nil {
		t.Fatal("a pass against a failing service succeeded")
	}
	st, err := store.Get(ctx, form)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Intents[open.BatchID]; !ok {
		t.Fatalf("the open batch's intent was dropped by a failed retry: %+v", st.Intents)
	}

	src.fail = false
	if res := p.Sync(ctx, job); res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(mem.batches) == 0 || mem.batches[0].ID != open.BatchID {
		t.Fatalf("first batch committed %+v, want the open batch %s", mem.batches, open.BatchID)
	}
	if b := mem.batches[0]; !b.WindowStart.Equal(open.Start) || !b.WindowEnd.Equal(open.End) || b.Table != open.Table {
		t.Errorf("open batch committed as %+v, want window [%s, %s) of table %s", b, open.Start, open.End, open.Table)
	}
	if mem.perRows[0] != 2 {
		t.Errorf("open batch committed %d rows, want 2", mem.perRows[0])
	}
	for id, n := range mem.rows {
		if n != 1 {
			t.Errorf("submission %s committed %d times", id, n)
		}
	}
	if len(mem.rows) != 3 {
		t.Errorf("%d submissions committed, want 3", len(mem.rows))
	}
	if st, _ := store.Get(ctx, form); len(st.Intents) != 0 {
		t.Errorf("intents left after the pass: %+v", st.Intents)
	}
}
