package poller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// gatedStream is a memStream of its own key whose reads take a while and
// count how many run at once.
type gatedStream struct {
	*memStream
	key      string
	inFlight *atomic.Int32
	maxSeen  *atomic.Int32
}

func (g gatedStream) Key() string { return g.key }

func (g gatedStream) Read(ctx context.Context, w Window, rows *Rows) error {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.maxSeen.Load(); n > m && !g.maxSeen.CompareAndSwap(m, n); m = g.maxSeen.Load() {
	}
	time.Sleep(5 * time.Millisecond)
	return g.memStream.Read(ctx, w, rows)
}

// orderSink records the order in which batches commit.
type orderSink struct {
	chunkSink
	mu    sync.Mutex
	order []string // stream key of each committed batch
}

func (s *orderSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	n, err := s.chunkSink.Commit(ctx, b, parts)
	s.mu.Lock()
	s.order = append(s.order, b.Table)
	s.mu.Unlock()
	return n, err
}

// TestGateServesAccountsInTurn: two accounts' pollers share a gate of one
// batch in flight. While one backfills many batches, the other's single
// batch waits for one slot, not for the whole backfill; and no two
// batches are ever read at once.
func TestGateServesAccountsInTurn(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var inFlight, maxSeen atomic.Int32
	stream := func(key string, n int) gatedStream {
		return gatedStream{memStream: memStreamBefore(now, n), key: key, inFlight: &inFlight, maxSeen: &maxSeen}
	}
	big, small := stream("big/versions", 400), stream("small/versions", 5)
	gate := semaphore.NewWeighted(1)
	bigSink, smallSink := &orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, &orderSink{chunkSink: chunkSink{done: map[string]bool{}}}
	var mu sync.Mutex
	opts := func() Options {
		return Options{ChunkRows: 64, MaxRowsPerBatch: 20, SpoolDir: t.TempDir(), Now: func() time.Time { return now }, Gate: gate}
	}
	pBig, pSmall := New(bigSink, store, opts()), New(smallSink, store, opts())
	var wg sync.WaitGroup
	var bigDone, smallDone time.Time
	wg.Add(2)
	go func() {
		defer wg.Done()
		if res := pBig.Sync(ctx, big, time.Time{}); res.Err != nil {
			t.Error(res.Err)
		}
		mu.Lock()
		bigDone = time.Now()
		mu.Unlock()
	}()
	// The small account's incremental pass starts once the backfill holds
	// the gate.
	for inFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	go func() {
		defer wg.Done()
		if res := pSmall.Sync(ctx, small, time.Time{}); res.Err != nil {
			t.Error(res.Err)
		}
		mu.Lock()
		smallDone = time.Now()
		mu.Unlock()
	}()
	wg.Wait()
	if got := maxSeen.Load(); got != 1 {
		t.Errorf("%d batches were read at once through a gate of 1", got)
	}
	bigSink.mu.Lock()
	batches := len(bigSink.order)
	bigSink.mu.Unlock()
	if batches < 10 {
		t.Fatalf("the backfill committed %d batches; the test needs many", batches)
	}
	if !smallDone.Before(bigDone) {
		t.Errorf("the small account's pass ended after the backfill of %d batches: it waited for all of them", batches)
	}
}

// planningStream is a gatedStream that plans its gap as one window holding
// what planning read (as the forms source does with a gap's first page),
// and counts the pages held at once: from planning until the window's
// batch has read it.
type planningStream struct {
	gatedStream
	held, maxHeld *atomic.Int32
}

func (p planningStream) Plan(_ context.Context, gap state.Interval, _ Cutter, emit func(Window) error) error {
	n := p.held.Add(1)
	for m := p.maxHeld.Load(); n > m && !p.maxHeld.CompareAndSwap(m, n); m = p.maxHeld.Load() {
	}
	count, _ := p.Count(context.Background(), gap.Start, gap.End)
	return emit(Window{Start: gap.Start, End: gap.End, Count: count, First: "page"})
}

func (p planningStream) Read(ctx context.Context, w Window, rows *Rows) error {
	if w.First != nil {
		defer p.held.Add(-1)
	}
	return p.gatedStream.Read(ctx, w, rows)
}

// TestPlanGateBoundsHeldPages: 24 accounts' first passes share a gate of
// one batch. Each plans by reading a page it keeps for its batch; with a
// PlanGate of 2 at most 2 such pages are held at once, however many
// accounts wait. Without it (the control) every account plans at once and
// holds its page while it waits for the batch slot: the first-sync memory
// of many accounts that sync.max_batches did not bound.
func TestPlanGateBoundsHeldPages(t *testing.T) {
	for _, tt := range []struct {
		name     string
		planGate *semaphore.Weighted
		check    func(maxHeld int32) bool
		want     string
	}{
		{"with a plan gate of 2", semaphore.NewWeighted(2), func(m int32) bool { return m >= 1 && m <= 2 }, "1 or 2"},
		{"without (control)", nil, func(m int32) bool { return m > 2 }, "more than 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := openTestStore(t)
			now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			var inFlight, maxSeen, held, maxHeld atomic.Int32
			gate := semaphore.NewWeighted(1)
			var wg sync.WaitGroup
			for a := range 24 {
				s := planningStream{gatedStream: gatedStream{memStream: memStreamBefore(now, 5), key: fmt.Sprintf("a%02d/versions", a), inFlight: &inFlight, maxSeen: &maxSeen},
					held: &held, maxHeld: &maxHeld}
				p := New(&orderSink{chunkSink: chunkSink{done: map[string]bool{}}}, store,
					Options{ChunkRows: 64, SpoolDir: t.TempDir(), Now: func() time.Time { return now }, Gate: gate, PlanGate: tt.planGate})
				wg.Add(1)
				go func() {
					defer wg.Done()
					if res := p.Sync(ctx, s, time.Time{}); res.Err != nil {
						t.Error(res.Err)
					}
				}()
			}
			wg.Wait()
			if got := maxHeld.Load(); !tt.check(got) {
				t.Errorf("%d planned pages were held at once, want %s", got, tt.want)
			}
			if got := held.Load(); got != 0 {
				t.Errorf("%d pages still held after every pass", got)
			}
			if got := maxSeen.Load(); got != 1 {
				t.Errorf("%d batches were read at once through a gate of 1", got)
			}
		})
	}
}
