package webhook

import (
	"context"
	"sync"
	"time"
)

// Bell runs the passes that deliveries ask for: at most one at a time per
// stream, a burst of deliveries merged into one pass, and a delivery that
// arrives while its stream's pass runs answered by one more pass once it
// ends ("run again when done"). The engine itself refuses a second pass of
// a stream (a scheduled one running): the Bell then tries again a little
// later, so the delivery's pass is never lost to a scheduled one that
// planned its window before the delivery arrived. A pass that fails is
// tried again a few times, with a growing wait.
type Bell struct {
	// Lag is how long after a delivery its pass may start: a pass covers
	// up to now - sync.safety_lag, so a submission is inside the window
	// only that long after it arrived.
	Lag time.Duration
	// Debounce is how long the first delivery of a burst waits for the
	// others.
	Debounce time.Duration
	// Retry is the wait before asking again for a pass the engine refused
	// as busy.
	Retry time.Duration
	// Run runs one pass of s: busy reports that another pass of the stream
	// was running (nothing ran), ok that the pass ended well.
	Run func(ctx context.Context, s Stream) (busy, ok bool)
	// Latency, if set, is told, for each delivery a pass that ended well
	// covered, the time from its arrival to the end of that pass.
	Latency func(s Stream, d time.Duration)
	// Now and After are the clock (time.Now, time.After when nil).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time

	mu       sync.Mutex
	ctx      context.Context
	stopping chan struct{}
	closed   bool
	wg       sync.WaitGroup
	streams  map[Stream]*pending
}

// pending is a stream with deliveries not yet covered by a pass that
// started, and the goroutine that runs its passes.
type pending struct {
	// arrivals are latency samples, at most maxArrivals of them: a flood
	// keeps only some.
	arrivals []time.Time
	// latest is the newest delivery no started pass covers yet, whether or
	// not arrivals kept it (zero when there is none): covering it covers
	// every older one, so the passes go by it and a delivery beyond the
	// samples is never left to the scheduled passes.
	latest time.Time
	due    bool // a pass not started yet will cover the latest delivery
}

// maxFailedPasses is how often a failed pass is tried again (after
// 2, 4 and 8 Retry) before its deliveries are left to the scheduled passes.
const maxFailedPasses = 3

// maxArrivals bounds the arrivals kept for the latency histogram of one
// stream; a flood beyond it still rings and is still covered (see
// pending.latest), with fewer samples.
const maxArrivals = 4096

// Start readies the Bell: ctx is what the passes run under (a stop lets
// them finish; Close stops the waits).
func (b *Bell) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx, b.stopping, b.streams = ctx, make(chan struct{}), map[Stream]*pending{}
}

// Ring asks for a pass of s covering a delivery that arrived at at. It
// reports whether a pass already due covers it (debounced).
func (b *Bell) Ring(s Stream, at time.Time) (debounced bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.streams == nil {
		return true // stopping: the next start's first pass covers it
	}
	p := b.streams[s]
	if p == nil {
		p = &pending{}
		b.streams[s] = p
		b.wg.Add(1)
		// A first pass this early may still leave the delivery out (see
		// coveredFrom): the loop then runs another.
		go b.loop(s, p, at.Add(b.Lag+b.Debounce))
	}
	debounced = p.due
	p.due = true
	if at.After(p.latest) {
		p.latest = at
	}
	if len(p.arrivals) < maxArrivals {
		p.arrivals = append(p.arrivals, at)
	}
	return debounced
}

// loop runs the passes of s until no delivery is left uncovered.
func (b *Bell) loop(s Stream, p *pending, fireAt time.Time) {
	defer b.wg.Done()
	failures := 0
	for {
		if !b.wait(fireAt.Sub(b.now())) {
			b.drop(s)
			return
		}
		b.mu.Lock()
		start := b.now()
		var covered, rest []time.Time
		for _, at := range p.arrivals {
			if !b.coveredFrom(at).After(start) {
				covered = append(covered, at)
			} else {
				rest = append(rest, at)
			}
		}
		// latest is the newest delivery: when this pass covers it, it covers
		// all (rest is then empty); when not, another pass is needed.
		latest := p.latest
		if !b.coveredFrom(latest).After(start) {
			p.latest = time.Time{}
		}
		p.arrivals, p.due = rest, !p.latest.IsZero()
		b.mu.Unlock()
		ok := b.run(s)
		if ok && b.Latency != nil {
			end := b.now()
			for _, at := range covered {
				b.Latency(s, end.Sub(at))
			}
		}
		b.mu.Lock()
		if !ok && failures < maxFailedPasses && !b.closed {
			// A pass that failed (a timeout, a refused write) is tried again
			// after a backoff, so that a transient error does not leave the
			// delivery to the next scheduled pass, an hour away perhaps.
			failures++
			p.arrivals, p.due = append(covered, p.arrivals...), true
			if len(p.arrivals) > maxArrivals {
				p.arrivals = p.arrivals[:maxArrivals] // samples only: latest keeps the coverage
			}
			if latest.After(p.latest) {
				p.latest = latest
			}
			fireAt = b.now().Add(b.Retry << failures)
			b.mu.Unlock()
			continue
		}
		failures = 0 // a pass ended well, or the scheduled passes take it from here
		if p.latest.IsZero() {
			delete(b.streams, s)
			b.mu.Unlock()
			return
		}
		fireAt = b.coveredFrom(p.latest)
		for _, at := range p.arrivals {
			if t := b.coveredFrom(at); t.Before(fireAt) {
				fireAt = t
			}
		}
		p.due = true
		b.mu.Unlock()
	}
}

// coveredFrom is the earliest start of a pass whose window holds what a
// delivery that arrived at announced. The engine's windows end at now -
// safety lag floored to the millisecond, exclusive: a pass started exactly
// Lag after the delivery could end its window on the very millisecond of
// the submission, leave it out, and still count the delivery covered (a
// submission then waited for the next scheduled pass, an hour away).
func (b *Bell) coveredFrom(at time.Time) time.Time {
	return at.Truncate(time.Millisecond).Add(time.Millisecond + b.Lag)
}

// run runs one pass of s, asking again while the engine says a pass of it
// is running; false when it failed or the Bell stopped first.
func (b *Bell) run(s Stream) bool {
	for {
		busy, ok := b.Run(b.ctx, s)
		if !busy {
			return ok
		}
		if !b.wait(b.Retry) {
			return false
		}
	}
}

// wait waits d; false when the Bell is closing first.
func (b *Bell) wait(d time.Duration) bool {
	select {
	case <-b.stopping:
		return false
	default:
	}
	if d <= 0 {
		return true
	}
	after := b.After
	if after == nil {
		after = time.After
	}
	select {
	case <-after(d):
		return true
	case <-b.stopping:
		return false
	case <-b.ctx.Done():
		return false
	}
}

func (b *Bell) drop(s Stream) {
	b.mu.Lock()
	delete(b.streams, s)
	b.mu.Unlock()
}

// Close stops the waits and takes no more deliveries, then waits for the
// passes in flight: what was not covered yet, the next start's first pass
// covers (the scheduled passes are the safety net).
func (b *Bell) Close() {
	b.mu.Lock()
	if b.closed || b.stopping == nil {
		b.closed = true
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.stopping)
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Bell) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}
