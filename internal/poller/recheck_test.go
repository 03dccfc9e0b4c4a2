package poller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
)

// TestSyncRecheck: a pass given windows that webhook deliveries announced
// re-reads, as a reconcile, only what of them was committed before it, and
// says which it left committed; it does not stand for the scheduled
// reconcile.
func TestSyncRecheck(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	synced := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	now := synced
	src := &reconcilingStream{memStream: &memStream{}}
	for d := 10; d > 0; d-- {
		src.times = append(src.times, synced.AddDate(0, 0, -d))
	}
	start := synced.AddDate(0, 0, -20)
	p := New(&orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, store, Options{SafetyLag: time.Minute, Lookback: 30 * 24 * time.Hour, ReconcileEvery: 24 * time.Hour,
		Now: func() time.Time { return now }})
	if res := p.Sync(ctx, src, start); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The checkpoint is at synced - 1m; the scheduled reconcile is not due.
	// Each case's pass commits up to its now - 1m.
	now = synced.Add(time.Hour)
	ms := func(t time.Time) state.Interval { return state.Interval{Start: t, End: t.Add(time.Millisecond)} }
	tests := []struct {
		name      string
		win       state.Interval
		committed bool
		reads     int // windows re-read
	}{
		{"ahead of the checkpoint: committed by the pass itself", ms(synced.Add(10 * time.Minute)), true, 0},
		{"behind the checkpoint: re-read", ms(synced.AddDate(0, 0, -3).Add(time.Hour)), true, 1},
		{"past the horizon: not committed", ms(now.Add(time.Minute)), false, 0},
		{"before the form's start: never synced", ms(start.Add(-time.Hour)), false, 0},
		{"committed by an earlier pass: re-read", state.Interval{Start: synced.Add(-2 * time.Minute), End: synced.Add(time.Minute)}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := src.windows
			res := p.SyncRecheck(ctx, src, start, []state.Interval{tt.win})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if !slices.Equal(res.Rechecked, []bool{tt.committed}) {
				t.Errorf("Rechecked %v, want [%v]", res.Rechecked, tt.committed)
			}
			if got := src.windows - before; got != tt.reads {
				t.Errorf("%d windows re-read, want %d", got, tt.reads)
			}
			st, err := store.Get(ctx, src.Key())
			if err != nil {
				t.Fatal(err)
			}
			if !st.Reconciled.Equal(synced) {
				t.Errorf("the form is recorded reconciled at %v, want %v: a recheck is not the scheduled reconcile", st.Reconciled, synced)
			}
		})
		now = now.Add(time.Second)
	}
}
