package webhook

import (
	"context"
	"sync"
	"testing"
	"time"
)

// clock is a fake clock: After's waits end only when the test fires them.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan chan time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), waits: make(chan chan time.Time, 100)}
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (c *clock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- ch
	return ch
}

// fire ends the next wait, after moving the clock by d.
func (c *clock) fire(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ch := <-c.waits:
		c.advance(d)
		ch <- c.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("no wait to end: the Bell is not waiting")
	}
}

// passes is a Run whose passes block until released, recording each.
type passes struct {
	started chan Stream
	release chan bool // busy
	mu      sync.Mutex
	n       int
}

func newPasses() *passes { return &passes{started: make(chan Stream, 100), release: make(chan bool)} }

func (p *passes) Run(_ context.Context, s Stream, _ []Window) Outcome {
	p.started <- s
	busy := <-p.release
	if !busy {
		p.mu.Lock()
		p.n++
		p.mu.Unlock()
	}
	return Outcome{Busy: busy, OK: !busy}
}

func (p *passes) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

func (p *passes) waitStart(t *testing.T) Stream {
	t.Helper()
	select {
	case s := <-p.started:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no pass started")
		return Stream{}
	}
}

func (p *passes) none(t *testing.T) {
	t.Helper()
	select {
	case s := <-p.started:
		t.Fatalf("a pass of %v started", s)
	default:
	}
}

func TestBellDebounce(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	f2 := Stream{Account: "a", Source: "forms", Stream: "f2"}
	tests := []struct {
		name           string
		burst          int // deliveries before the first pass starts
		duringPass     int // deliveries while it runs
		busy           int // times the engine says a scheduled pass runs
		wantPasses     int
		wantDebounced  int
		wantLatencyObs int
	}{
		{"one delivery, one pass", 1, 0, 0, 1, 0, 1},
		{"a burst, one pass", 20, 0, 0, 1, 19, 20},
		{"a burst and more while it runs: one rerun", 20, 7, 0, 2, 19 + 6, 27},
		{"a scheduled pass running: asked again, still one pass", 5, 0, 2, 1, 4, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := newClock(), newPasses()
			var mu sync.Mutex
			var lat []time.Duration
			b := &Bell{Lag: 2 * time.Second, Debounce: 500 * time.Millisecond, Retry: time.Second, Run: p.Run, Now: c.Now, After: c.After,
				Latency: func(_ Stream, d time.Duration) { mu.Lock(); lat = append(lat, d); mu.Unlock() }}
			b.Start(context.Background())
			debounced := 0
			for range tt.burst {
				if b.Ring(f1, c.Now(), time.Time{}) {
					debounced++
				}
				c.advance(10 * time.Millisecond)
			}
			c.fire(t, 3*time.Second) // lag and debounce pass
			for range tt.busy {
				if s := p.waitStart(t); s != f1 {
					t.Fatalf("pass of %v", s)
				}
				p.release <- true
				c.fire(t, time.Second) // the retry's wait
			}
			if s := p.waitStart(t); s != f1 {
				t.Fatalf("pass of %v", s)
			}
			for range tt.duringPass {
				if b.Ring(f1, c.Now(), time.Time{}) {
					debounced++
				}
			}
			p.none(t)
			p.release <- false
			if tt.duringPass > 0 {
				c.fire(t, 3*time.Second)
				p.waitStart(t)
				p.release <- false
			}
			b.Close()
			if got := p.count(); got != tt.wantPasses {
				t.Errorf("%d passes, want %d", got, tt.wantPasses)
			}
			if debounced != tt.wantDebounced {
				t.Errorf("%d deliveries debounced, want %d", debounced, tt.wantDebounced)
			}
			if len(lat) != tt.wantLatencyObs {
				t.Errorf("%d latency samples, want %d", len(lat), tt.wantLatencyObs)
			}
			for _, d := range lat {
				if d < 2*time.Second {
					t.Errorf("latency %v is less than the lag: the pass started before the delivery was in its window", d)
				}
			}
		})
	}
	t.Run("streams are independent", func(t *testing.T) {
		c, p := newClock(), newPasses()
		b := &Bell{Run: p.Run, Now: c.Now, After: c.After}
		b.Start(context.Background())
		if b.Ring(f1, c.Now(), time.Time{}) || b.Ring(f2, c.Now(), time.Time{}) {
			t.Fatal("the first delivery of each stream must be accepted, not debounced")
		}
		got := map[Stream]bool{p.waitStart(t): true, p.waitStart(t): true}
		if !got[f1] || !got[f2] {
			t.Fatalf("passes of %v, want f1 and f2 at once", got)
		}
		p.release <- false
		p.release <- false
		b.Close()
	})
	t.Run("closed: no pass starts", func(t *testing.T) {
		c, p := newClock(), newPasses()
		b := &Bell{Lag: time.Minute, Run: p.Run, Now: c.Now, After: c.After}
		b.Start(context.Background())
		b.Ring(f1, c.Now(), time.Time{})
		<-c.waits // waiting for the lag
		b.Close()
		b.Ring(f1, c.Now(), time.Time{})
		p.none(t)
		if p.count() != 0 {
			t.Fatal("a pass ran after Close")
		}
	})
}

// TestBellRetriesAFailedPass: a pass that fails is tried again after a
// growing wait, covering the same deliveries, until one ends well; after
// maxFailedPasses failures in a row the deliveries are left to the
// scheduled passes.
func TestBellRetriesAFailedPass(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	tests := []struct {
		name        string
		failures    int // passes that fail before one ends well
		wantPasses  int
		wantLatency int // deliveries reported covered by a pass that ended well
	}{
		{"one failure, then covered", 1, 2, 3},
		{"three failures, then covered", maxFailedPasses, maxFailedPasses + 1, 3},
		{"always failing: given up", maxFailedPasses + 5, maxFailedPasses + 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			started := make(chan struct{}, 100)
			var mu sync.Mutex
			runs, lat := 0, 0
			b := &Bell{Lag: time.Second, Debounce: 100 * time.Millisecond, Retry: time.Second, Now: c.Now, After: c.After,
				Run: func(context.Context, Stream, []Window) Outcome {
					mu.Lock()
					runs++
					ok := runs > tt.failures
					mu.Unlock()
					started <- struct{}{}
					return Outcome{OK: ok}
				},
				Latency: func(Stream, time.Duration) { mu.Lock(); lat++; mu.Unlock() }}
			b.Start(context.Background())
			for range 3 {
				b.Ring(f1, c.Now(), time.Time{})
			}
			for i := 0; i < tt.wantPasses; i++ {
				c.fire(t, 10*time.Second) // the first wait, then each backoff
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatalf("pass %d never started", i+1)
				}
			}
			b.Close()
			mu.Lock()
			defer mu.Unlock()
			if runs != tt.wantPasses || lat != tt.wantLatency {
				t.Errorf("%d passes and %d deliveries covered, want %d and %d", runs, lat, tt.wantPasses, tt.wantLatency)
			}
		})
	}
}

// TestBellCoversTheDeliverysMillisecond: the engine's window ends at now -
// lag floored to the millisecond, exclusive. A pass started exactly Lag
// after a delivery may end its window on the delivery's own millisecond
// and leave the submission out: the Bell must run another pass, late
// enough to cover it, and count the delivery covered only by that one.
func TestBellCoversTheDeliverysMillisecond(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	c, p := newClock(), newPasses()
	var covered []time.Duration
	b := &Bell{Lag: time.Second, Retry: time.Second, Run: p.Run, Now: c.Now, After: c.After,
		Latency: func(_ Stream, d time.Duration) { covered = append(covered, d) }}
	b.Start(context.Background())
	c.advance(400 * time.Microsecond) // the delivery arrives inside a millisecond
	b.Ring(f1, c.Now(), time.Time{})
	c.fire(t, time.Second) // exactly the lag: the first pass starts
	p.waitStart(t)
	p.release <- false
	c.fire(t, time.Millisecond) // the wait for a start that covers it
	p.waitStart(t)
	p.release <- false
	b.Close()
	if got := p.count(); got != 2 {
		t.Errorf("%d passes, want 2: the first could not cover the delivery's millisecond", got)
	}
	if len(covered) != 1 || covered[0] <= time.Second {
		t.Errorf("latency samples %v, want one, from the pass that started over the lag plus a millisecond after the delivery", covered)
	}
}

// TestBellCoversALateDeliveryAfterAFlood: past maxArrivals a stream stops
// keeping latency samples, but a delivery it answers as debounced must still
// be covered by a triggered pass. A burst fills the samples, then one more
// delivery arrives too late for the first pass's window: a second pass must
// run for it, not the next scheduled one an hour away.
func TestBellCoversALateDeliveryAfterAFlood(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	tests := []struct {
		name  string
		burst int
	}{
		{"one delivery", 1},
		{"samples just full", maxArrivals},
		{"samples overflowed", maxArrivals + 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := newClock(), newPasses()
			b := &Bell{Lag: 10 * time.Second, Debounce: time.Second, Retry: time.Second, Run: p.Run, Now: c.Now, After: c.After}
			b.Start(context.Background())
			defer b.Close()
			for range tt.burst {
				b.Ring(f1, c.Now(), time.Time{})
			}
			c.advance(5 * time.Second)
			if !b.Ring(f1, c.Now(), time.Time{}) {
				t.Fatal("the late delivery was not debounced: the first pass should cover it or be followed by one that does")
			}
			c.fire(t, 6*time.Second) // t0+11s: the first pass, whose window ends at t0+1s
			p.waitStart(t)
			p.release <- false
			select {
			case ch := <-c.waits:
				c.advance(10 * time.Second)
				ch <- c.Now()
			case <-time.After(2 * time.Second):
				t.Fatalf("the delivery at t0+5s was answered as covered but no pass covering it is due (%d passes ran)", p.count())
			}
			p.waitStart(t)
			p.release <- false
		})
	}
}

// TestBellFloodWithFailedPasses: a failed pass puts the deliveries it
// covered back, before those that arrived while it ran. The samples stay
// bounded after a flood, and the deliveries beyond them are still covered.
func TestBellFloodWithFailedPasses(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	c := newClock()
	started, results := make(chan struct{}, 10), make(chan bool)
	var mu sync.Mutex
	samples := 0
	b := &Bell{Lag: 10 * time.Second, Debounce: time.Second, Retry: time.Second, Now: c.Now, After: c.After,
		Run: func(context.Context, Stream, []Window) Outcome {
			started <- struct{}{}
			return Outcome{OK: <-results}
		},
		Latency: func(Stream, time.Duration) { mu.Lock(); samples++; mu.Unlock() }}
	b.Start(context.Background())
	defer b.Close()
	pass := func(n int, ok bool) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("pass %d never started", n)
		}
		results <- ok
	}
	for range 2 * maxArrivals {
		b.Ring(f1, c.Now(), time.Time{})
	}
	c.fire(t, 11*time.Second) // t0+11s: the first pass covers the flood
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("pass 1 never started")
	}
	for range 10 {
		b.Ring(f1, c.Now(), time.Time{}) // while it runs: only a pass from t0+21s covers these
	}
	results <- false         // it fails
	c.fire(t, 2*time.Second) // its backoff, t0+13s: covers the flood again
	pass(2, true)
	c.fire(t, 10*time.Second) // t0+23s: covers the deliveries of t0+11s
	pass(3, true)
	select {
	case <-c.waits:
		t.Fatal("a fourth pass is due: every delivery was covered")
	case <-time.After(200 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	if samples > maxArrivals {
		t.Errorf("%d latency samples, want at most %d: the failed pass's merge overflowed the bound", samples, maxArrivals)
	}
}
