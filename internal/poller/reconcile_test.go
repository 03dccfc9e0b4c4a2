package poller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
)

// reconcilingStream is a memStream whose records never change: a
// reconcile finds nothing, and the windows it reads are counted.
type reconcilingStream struct {
	*memStream
	windows int
}

func (r *reconcilingStream) Reconcile(context.Context, Window, map[string]state.Version, time.Time) (Changes, error) {
	r.windows++
	return Changes{}, nil
}

// TestReconcileOfPartOfTheLookbackIsNotTheScheduledOne: only a reconcile
// that read all of sync.lookback records the form as reconciled; one from
// a later date (or from past now, reading nothing) must not put the
// scheduled reconcile off.
func TestReconcileOfPartOfTheLookbackIsNotTheScheduledOne(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	synced := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	now := synced
	src := &reconcilingStream{memStream: &memStream{}}
	for d := 40; d > 0; d-- {
		src.times = append(src.times, synced.AddDate(0, 0, -d))
	}
	const lookback = 30 * 24 * time.Hour
	p := New(&orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, store, Options{SafetyLag: time.Minute, Lookback: lookback, ReconcileEvery: 24 * time.Hour,
		Now: func() time.Time { return now }})
	if res := p.Sync(ctx, src, synced.AddDate(0, 0, -41)); res.Err != nil {
		t.Fatal(res.Err)
	}
	reconciled := func() time.Time {
		t.Helper()
		st, err := store.Get(ctx, src.Key())
		if err != nil {
			t.Fatal(err)
		}
		return st.Reconciled
	}
	if got := reconciled(); !got.Equal(synced) {
		t.Fatalf("after the first pass the form was reconciled at %v, want %v (the index starts current)", got, synced)
	}
	now = synced.Add(25 * time.Hour) // the scheduled reconcile is due
	for _, from := range []time.Time{now.Add(-48 * time.Hour), now.Add(time.Hour), now.AddDate(1, 0, 0)} {
		res := p.Reconcile(ctx, src, from)
		if res.Err != nil {
			t.Fatalf("reconcile from %v: %v", from, res.Err)
		}
		if got := reconciled(); !got.Equal(synced) {
			t.Errorf("a reconcile from %v (part of the lookback) recorded the form reconciled at %v: the scheduled reconcile is put off", from, got)
		}
	}
	for _, from := range []time.Time{{}, now.Add(-lookback - time.Hour)} {
		before := src.windows
		if res := p.Reconcile(ctx, src, from); res.Err != nil {
			t.Fatalf("reconcile from %v: %v", from, res.Err)
		}
		if src.windows == before {
			t.Errorf("a reconcile from %v read no window", from)
		}
		if got := reconciled(); !got.Equal(now) {
			t.Errorf("a reconcile from %v (the whole lookback) recorded the form reconciled at %v, want %v", from, got, now)
		}
		now = now.Add(time.Hour)
	}
}

// TestReconcileOutsideTheIndexWritesNothing: a reconcile from before the
// version index is the operator's mistake (exit 2): the form's state is not
// touched (no error recorded, no update), and the message gives a command
// that works.
func TestReconcileOutsideTheIndexWritesNothing(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	src := &reconcilingStream{memStream: memStreamBefore(now, 100)}
	p := New(&orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, store, Options{SafetyLag: time.Minute, Lookback: 30 * 24 * time.Hour, Now: func() time.Time { return now }})

	// No index yet: nothing synced.
	res := p.Reconcile(ctx, src, time.Time{})
	var noIndex *ErrNoIndex
	if !errors.As(res.Err, &noIndex) {
		t.Fatalf("reconcile of a form never synced: %v, want an ErrNoIndex", res.Err)
	}
	if list, _ := store.List(ctx); len(list) != 0 {
		t.Errorf("a refused reconcile wrote the state of %v", list)
	}

	indexed := now.Add(-time.Hour)
	if err := store.Commit(ctx, src.Key(), state.Commit{IndexFrom: indexed, Window: state.Interval{Start: now.Add(-2 * time.Hour), End: now.Add(-time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	before, err := store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	res = p.Reconcile(ctx, src, now.Add(-90*time.Minute))
	if !errors.As(res.Err, &noIndex) {
		t.Fatalf("reconcile from before the index: %v, want an ErrNoIndex", res.Err)
	}
	// The stream is versions of account mem: adopt takes the form id as an
	// argument, the account as a flag.
	if msg := res.Err.Error(); !strings.Contains(msg, "`syncd state adopt versions --account mem`") || strings.Contains(msg, "adopt --form") {
		t.Errorf("the message gives no working adopt command: %s", msg)
	}
	after, err := store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.LastError != before.LastError || !after.LastSuccess.Equal(before.LastSuccess) {
		t.Errorf("a refused reconcile wrote the state: updated %v -> %v, last error %q -> %q", before.UpdatedAt, after.UpdatedAt, before.LastError, after.LastError)
	}
	if src.windows != 0 {
		t.Errorf("a refused reconcile read %d windows", src.windows)
	}

	// With sync.lookback 0 a reconcile without --from covers the whole
	// history the index holds.
	p0 := New(&orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, store, Options{SafetyLag: time.Minute, Now: func() time.Time { return now }})
	if res := p0.Reconcile(ctx, src, time.Time{}); res.Err != nil || src.windows == 0 {
		t.Errorf("reconcile of the whole index (sync.lookback 0): %v, %d windows read", res.Err, src.windows)
	}
}
