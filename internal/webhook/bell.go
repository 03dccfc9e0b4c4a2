package webhook

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
)

// Bell runs the passes that deliveries ask for: at most one at a time per
// stream, a burst of deliveries merged into one pass, and a delivery that
// arrives while its stream's pass runs answered by one more pass once it
// ends ("run again when done"). The engine itself refuses a second pass of
// a stream (a scheduled one running): the Bell then tries again a little
// later, so the delivery's pass is never lost to a scheduled one that
// planned its window before the delivery arrived. A pass that fails is
// tried again a few times, with a growing wait.
//
// A delivery may announce its record's time (a submission's
// submissionTime). An imported submission may carry any time, behind the
// stream's checkpoint, where an incremental pass never looks: the Bell
// hands the announced times to the pass, coalesced into a few windows
// (Recheck), for it to re-read those already committed.
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
	// Run runs one pass of s, which also re-reads what of recheck was
	// committed before it (nil: no delivery announced a time).
	Run func(ctx context.Context, s Stream, recheck []Window) Outcome
	// Latency, if set, is told, for each delivery a pass that ended well
	// covered and committed, the time from its arrival to the end of that
	// pass.
	Latency func(s Stream, d time.Duration)
	// Now and After are the clock (time.Now, time.After when nil).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Log, if set, says when announced times are left to the scheduled
	// reconcile (nil: nothing is logged).
	Log *zap.Logger

	mu       sync.Mutex
	ctx      context.Context
	stopping chan struct{}
	closed   bool
	wg       sync.WaitGroup
	streams  map[Stream]*pending
}

// Window is the span [Start, End) of record times a pass is asked to
// re-read.
type Window struct{ Start, End time.Time }

// Outcome is what one pass did.
type Outcome struct {
	// Busy: another pass of the stream was running, nothing ran.
	Busy bool
	// OK: the pass ended well.
	OK bool
	// Missed are the windows of the pass's recheck it did not leave
	// committed as the API lists them now (behind the version index,
	// outside the stream's synced range, past the horizon): their
	// deliveries get no latency sample, and the scheduled passes take
	// them from there.
	Missed []Window
}

// arrival is a delivery kept as a latency sample: when it arrived, and
// the record time it announced (zero: none, or one the Bell had no room
// for, which lost is then set).
type arrival struct {
	at, announced time.Time
	lost          bool
}

// pending is a stream with deliveries not yet covered by a pass that
// started, and the goroutine that runs its passes.
type pending struct {
	// arrivals are latency samples, at most maxArrivals of them: a flood
	// keeps only some.
	arrivals []arrival
	// announced are the record times deliveries announced (to the
	// millisecond), not yet handed to a pass, each with the start from
	// which a pass covers the newest delivery that announced it: a time
	// is re-read only once its record is surely listed. At most
	// maxAnnounced of them.
	announced map[time.Time]time.Time
	// lost counts the announced times there was no room for since the
	// last pass (logged then).
	lost int
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

// Bounds on what deliveries can make a pass re-read, so that a flood of
// deliveries (or forged ones, from a leaked token) costs a bounded number
// of requests: announced times are kept to maxAnnounced per stream (the
// others are left to the scheduled reconcile, logged); one pass re-reads
// at most maxRecheck windows (the next pass takes the others); a window
// joins times of one UTC day (the output's partition) no more than
// recheckGap apart, so one delivery alone costs a read of its own
// millisecond, and a window never spans more than a day.
const (
	maxAnnounced = 4096
	maxRecheck   = 16
	recheckGap   = 10 * time.Minute
)

// Start readies the Bell: ctx is what the passes run under (a stop lets
// them finish; Close stops the waits).
func (b *Bell) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx, b.stopping, b.streams = ctx, make(chan struct{}), map[Stream]*pending{}
}

// Ring asks for a pass of s covering a delivery that arrived at at and
// announced a record of time announced (zero: none). It reports whether a
// pass already due covers it (debounced).
func (b *Bell) Ring(s Stream, at, announced time.Time) (debounced bool) {
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
	a := arrival{at: at}
	if !announced.IsZero() {
		t := announced.UTC().Truncate(time.Millisecond)
		if p.announce(t, b.coveredFrom(at)) {
			a.announced = t
		} else {
			a.lost = true // its record is not re-read: no latency sample
		}
	}
	if len(p.arrivals) < maxArrivals {
		p.arrivals = append(p.arrivals, a)
	}
	return debounced
}

// announce keeps t for a pass from due on; false when there is no room.
func (p *pending) announce(t, due time.Time) bool {
	if p.announced == nil {
		p.announced = map[time.Time]time.Time{}
	}
	old, ok := p.announced[t]
	if !ok && len(p.announced) >= maxAnnounced {
		p.lost++
		return false
	}
	if !ok || due.After(old) {
		p.announced[t] = due
	}
	return true
}

// loop runs the passes of s until no delivery is left uncovered and no
// announced time is left to re-read.
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
		recheck, taken := p.take(start)
		var covered, rest []arrival
		for _, a := range p.arrivals {
			// A delivery is covered once the window holds it and, when it
			// announced a time, that time no longer waits for a later pass.
			_, waits := p.announced[a.announced]
			if !b.coveredFrom(a.at).After(start) && (a.announced.IsZero() || !waits) {
				covered = append(covered, a)
			} else {
				rest = append(rest, a)
			}
		}
		// latest is the newest delivery: when this pass covers it, it covers
		// all (rest is then empty); when not, another pass is needed.
		latest := p.latest
		if !b.coveredFrom(latest).After(start) {
			p.latest = time.Time{}
		}
		lost := p.lost
		p.lost = 0
		p.arrivals, p.due = rest, !p.latest.IsZero() || len(p.announced) > 0
		b.mu.Unlock()
		if lost > 0 && b.Log != nil {
			b.Log.Warn("deliveries announced more submission times than a stream keeps for its triggered passes: those left out are re-read by the scheduled reconcile",
				zap.String(logkey.Account, s.Account), zap.String(logkey.Source, s.Source), zap.String(logkey.Stream, s.Stream),
				zap.Int(logkey.LeftOut, lost), zap.Int(logkey.Kept, maxAnnounced))
		}
		out := b.run(s, recheck)
		if out.OK && b.Latency != nil {
			end := b.now()
			for _, a := range covered {
				// A time the pass did not commit has no latency yet: the
				// scheduled reconcile brings it, hours away perhaps.
				if a.lost || (!a.announced.IsZero() && inAny(out.Missed, a.announced)) {
					continue
				}
				b.Latency(s, end.Sub(a.at))
			}
		}
		b.mu.Lock()
		if !out.OK && failures < maxFailedPasses && !b.closed {
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
			for t, due := range taken {
				// Back whatever the room: these were kept before, and the
				// map holds at most twice maxAnnounced.
				if old, ok := p.announced[t]; !ok || due.After(old) {
					p.announced[t] = due
				}
			}
			fireAt = b.now().Add(b.Retry << failures)
			b.mu.Unlock()
			continue
		}
		failures = 0 // a pass ended well, or the scheduled passes take it from here
		if p.latest.IsZero() && len(p.announced) == 0 {
			delete(b.streams, s)
			b.mu.Unlock()
			return
		}
		fireAt = p.next(b.coveredFrom)
		p.due = true
		b.mu.Unlock()
	}
}

// next is when the next pass of p may start: the earliest instant at which
// a pass covers one of its deliveries or re-reads one of its times.
func (p *pending) next(coveredFrom func(time.Time) time.Time) time.Time {
	var at time.Time
	earlier := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if !p.latest.IsZero() {
		earlier(coveredFrom(p.latest))
	}
	for _, a := range p.arrivals {
		// A delivery whose time waits for a later delivery announcing it
		// too is covered only with that one: no pass before.
		t := coveredFrom(a.at)
		if due, ok := p.announced[a.announced]; ok && due.After(t) {
			t = due
		}
		earlier(t)
	}
	for _, due := range p.announced {
		earlier(due)
	}
	return at
}

// take hands a pass starting at start the announced times it may re-read
// (those whose deliveries it covers), coalesced into at most maxRecheck
// windows; the times it took leave p.announced, with their due.
func (p *pending) take(start time.Time) ([]Window, map[time.Time]time.Time) {
	var ready []time.Time
	for t, due := range p.announced {
		if !due.After(start) {
			ready = append(ready, t)
		}
	}
	if len(ready) == 0 {
		return nil, nil
	}
	slices.SortFunc(ready, func(a, b time.Time) int { return a.Compare(b) })
	wins, counts := coalesce(ready)
	if len(wins) > maxRecheck {
		// The next pass takes the others.
		wins, counts = wins[:maxRecheck], counts[:maxRecheck]
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	taken := make(map[time.Time]time.Time, n)
	for _, t := range ready[:n] {
		taken[t] = p.announced[t]
		delete(p.announced, t)
	}
	return wins, taken
}

// coalesce joins sorted times into windows [first, last + 1ms), each of
// one UTC day and of times no more than recheckGap apart; counts[i] is the
// number of times window i holds.
func coalesce(times []time.Time) (wins []Window, counts []int) {
	for _, t := range times {
		if k := len(wins) - 1; k >= 0 {
			last := wins[k].End.Add(-time.Millisecond)
			if sameDay(last, t) && t.Sub(last) <= recheckGap {
				wins[k].End = t.Add(time.Millisecond)
				counts[k]++
				continue
			}
		}
		wins = append(wins, Window{Start: t, End: t.Add(time.Millisecond)})
		counts = append(counts, 1)
	}
	return wins, counts
}

func sameDay(a, b time.Time) bool {
	return a.UTC().Truncate(24 * time.Hour).Equal(b.UTC().Truncate(24 * time.Hour))
}

// inAny reports whether t lies in one of wins.
func inAny(wins []Window, t time.Time) bool {
	return slices.ContainsFunc(wins, func(w Window) bool { return !t.Before(w.Start) && t.Before(w.End) })
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
// is running; not OK when it failed or the Bell stopped first.
func (b *Bell) run(s Stream, recheck []Window) Outcome {
	for {
		out := b.Run(b.ctx, s, recheck)
		if !out.Busy {
			return out
		}
		if !b.wait(b.Retry) {
			return Outcome{}
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
