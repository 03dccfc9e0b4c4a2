// Package shard spreads accounts over the replicas of `syncd run` that
// share one bucket state. Each replica heartbeats a member object in the
// bucket, counts the live members, and claims accounts up to its share
// through a Claimer (the per-account lease objects of the state); it hands
// back what is above its share when a member joins, and everything at once
// when it drains.
//
// # Algorithm
//
// Every heartbeat interval a member rewrites <members>/<id> with an expiry
// one member TTL ahead and the accounts it owns. One interval later, and
// every interval after, it rebalances:
//
//  1. Accounts no longer configured are released.
//  2. The live members are those whose expiry is in the future. With n
//     accounts and m members each member's share is n/m, one more for the
//     first n%m members by ID, so the shares add up to n.
//  3. Above its share, a member releases the surplus: first the accounts
//     that prefer another live member (rendezvous hashing: an account
//     prefers the member with the highest hash of the two names).
//  4. Below its share, it claims accounts that no live member lists, the
//     accounts that prefer it first. A Claim refused as held (IsHeld) is
//     skipped: a peer that died still holds it until its lease expires.
//
// The lease objects, not this package, decide who owns an account: a
// member only counts an account as owned after its Claim succeeded and
// stops counting it before it calls Release, so two members never count
// the same account at once.
//
// # Takeover bound
//
// A member that dies stops heartbeating and renewing its leases. Its peers
// leave its accounts alone while its record lives (at most the member TTL)
// and their Claims are refused while its leases live (at most the lease
// TTL); the first rebalance after both have passed takes the accounts. So
// a dead member's accounts wait at most
//
//	max(member TTL, lease TTL) + one heartbeat interval
//
// plus the time of one rebalance and the clock skew between the pods (the
// expiries are written by the holder's clock and read by the peer's),
// which is within the member TTL + lease TTL + one interval that the
// design promises. A drained member's accounts wait at most about two
// intervals: it deletes its record and releases its leases at once, and a
// peer's next rebalance sees the record gone and claims them (or the one
// after, if that Claim came before the Release).
package shard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// Claimer takes and gives back the lease of one account. Claim fails with
// an error for which Options.IsHeld holds when a live peer holds the
// account. Drain calls Release from several goroutines at once.
//
// A Claimer that also has a method Lost(account string) <-chan struct{}
// (as state.Sharded does) reports leases taken over by a peer: the
// Coordinator then forgets the account without calling Release, since the
// lease is no longer its own, and calls OnChange.
type Claimer interface {
	Claim(ctx context.Context, account string) error
	Release(account string) error
}

// loser is the optional side of a Claimer that reports lost leases.
type loser interface {
	Lost(account string) <-chan struct{}
}

// Options configure a Coordinator.
type Options struct {
	// Members is the bucket URL of the folder of member objects, e.g.
	// MembersURL(the state URL). It must name a folder, not a bucket's
	// root.
	Members string
	// ID names this member; unique among the live members. Default: the
	// host name and a random suffix. A StatefulSet passes the pod name,
	// so that after a restart the accounts that prefer it come back.
	ID string
	// Heartbeat is how often the member object is rewritten and the
	// accounts rebalanced. Default 5s.
	Heartbeat time.Duration
	// TTL is how long a member counts as live after its last heartbeat.
	// Default 3 heartbeats.
	TTL time.Duration

	// Accounts returns the configured accounts; it is called at every
	// rebalance, so a reload that changes them takes effect at the next
	// one (or at once after Refresh).
	Accounts func() []string
	Claimer  Claimer
	// IsHeld reports whether a Claim error means a live peer holds the
	// account. Other Claim errors are logged as failures.
	IsHeld func(error) bool
	// BeforeRelease stops the account's passes, lets no new one start,
	// and returns once none runs; then the lease is released: a pass
	// must not commit after another member took the account. An error (ctx done before the
	// pass ended) keeps the account and its lease. The Coordinator, not
	// the Claimer, makes this call so that the state's leases need know
	// nothing of passes. Nil: nothing to stop.
	BeforeRelease func(ctx context.Context, account string) error
	// OnChange receives the owned accounts, sorted, after a rebalance or
	// a drain changed them, so the daemon reloads its entries. Calls do
	// not overlap, and they must not call Drain (which waits for them).
	OnChange func(owned []string)

	Logger *zap.Logger      // default: no logging
	Now    func() time.Time // default time.Now
}

// Stats are a member's counters since New.
type Stats struct {
	Heartbeats int64 // member objects written
	Rebalances int64 // rebalances run
	Claims     int64 // accounts claimed
	Releases   int64 // accounts released: surplus, unconfigured or drained
	Held       int64 // Claims refused because a peer held the account
	Lost       int64 // leases a peer took over (reported by the Claimer)
	Errors     int64 // failed heartbeats, listings, Claims and Releases
	Members    int   // live members at the last rebalance
	Share      int   // this member's share at the last rebalance
	// LastClaim is when the last Claim succeeded: after a peer's death,
	// LastClaim minus the time of death is how long its last account
	// waited.
	LastClaim time.Time
}

// Coordinator is one member. Its methods are safe for concurrent use.
type Coordinator struct {
	id, host, shown string
	pid             int
	started         time.Time
	bucket          *blob.Bucket
	interval, ttl   time.Duration
	accounts        func() []string
	claimer         Claimer
	isHeld          func(error) bool
	beforeRelease   func(context.Context, string) error
	onChange        func([]string)
	log             *zap.Logger
	now             func() time.Time

	// turn serializes rebalances and Drain: one holds it at a time.
	turn      chan struct{}
	refresh   chan struct{} // a rebalance is asked for now
	beatNow   chan struct{} // a heartbeat is asked for now (ownership changed)
	drained   chan struct{} // closed when Drain starts
	drainOnce sync.Once
	drainDone chan struct{} // closed when the first Drain returns
	doneOnce  sync.Once
	draining  atomic.Bool

	beatMu sync.Mutex        // a heartbeat or leave in flight
	ver    blobstore.Version // of the member object, as last written
	known  bool              // ver is known: the last write succeeded
	left   bool

	mu      sync.Mutex
	owned   map[string]chan struct{} // account → closed when no longer owned
	lostNew bool                     // a lease was lost since the last rebalance
	expires time.Time                // of the last heartbeat written
	stats   Stats
}

// New checks opts and opens the members' bucket; Close closes it.
func New(ctx context.Context, opts Options) (*Coordinator, error) {
	if opts.Claimer == nil || opts.Accounts == nil {
		return nil, errors.New("shard: Options need a Claimer and an Accounts func")
	}
	loc, err := blobstore.Parse(opts.Members)
	if err != nil {
		return nil, fmt.Errorf("shard: members: %w", err)
	}
	if loc.Scheme != "file" && loc.Prefix == "" {
		return nil, fmt.Errorf("shard: members URL %s names a bucket, not a folder in it", loc.Shown)
	}
	host, _ := os.Hostname()
	id := opts.ID
	if id == "" {
		var b [4]byte
		rand.Read(b[:])
		id = strings.Trim(host+"-"+hex.EncodeToString(b[:]), "-")
	}
	if strings.ContainsAny(id, "/\\") || strings.TrimSpace(id) != id {
		return nil, fmt.Errorf("shard: member ID %q: no slashes or surrounding spaces", id)
	}
	c := &Coordinator{
		id: id, host: host, shown: loc.Shown, pid: os.Getpid(),
		interval: opts.Heartbeat, ttl: opts.TTL,
		accounts: opts.Accounts, claimer: opts.Claimer, isHeld: opts.IsHeld,
		beforeRelease: opts.BeforeRelease, onChange: opts.OnChange,
		log: opts.Logger, now: opts.Now,
		turn: make(chan struct{}, 1), refresh: make(chan struct{}, 1), beatNow: make(chan struct{}, 1),
		drained: make(chan struct{}), drainDone: make(chan struct{}), owned: make(map[string]chan struct{}),
	}
	if c.interval <= 0 {
		c.interval = 5 * time.Second
	}
	if c.ttl <= 0 {
		c.ttl = 3 * c.interval
	}
	if c.ttl <= c.interval {
		return nil, fmt.Errorf("shard: member TTL %v must exceed the heartbeat interval %v", c.ttl, c.interval)
	}
	if c.isHeld == nil {
		c.isHeld = func(error) bool { return false }
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.log = c.log.With(zap.String(logkey.Member, id))
	if c.now == nil {
		c.now = time.Now
	}
	c.started = c.now().UTC()
	c.bucket, err = blobstore.Open(ctx, loc, true)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return c, nil
}

// ID is this member's ID.
func (c *Coordinator) ID() string { return c.id }

// Close closes the members' bucket. Call it once Run and Drain returned.
func (c *Coordinator) Close() error { return c.bucket.Close() }

// Run heartbeats and rebalances until ctx is done (it returns ctx.Err(),
// leaving the member object and the leases to expire, as a killed process
// would) or Drain was called (it returns nil once Drain finished). Errors
// of the bucket or the Claimer are logged and retried at the next tick.
func (c *Coordinator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.beat(ctx) })

	// The first rebalance waits one interval, so that members started
	// together see each other before claiming rather than one taking
	// everything and handing most of it back.
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.drained:
			// Wait for Drain to finish: its caller may close the bucket
			// once Run returned.
			select {
			case <-c.drainDone:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-t.C:
		case <-c.refresh:
		}
		c.rebalance(ctx)
	}
}

// beat heartbeats every interval, and at once when ownership changed.
func (c *Coordinator) beat(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.heartbeat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.drained:
			return
		case <-t.C:
		case <-c.beatNow:
		}
	}
}

// Refresh asks Run for a rebalance now, e.g. after a reload changed the
// accounts.
func (c *Coordinator) Refresh() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// Owned returns the accounts this member owns, sorted.
func (c *Coordinator) Owned() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	owned := make([]string, 0, len(c.owned))
	for a := range c.owned {
		owned = append(owned, a)
	}
	slices.Sort(owned)
	return owned
}

// Ready is for /readyz: the owned accounts, and whether this member
// takes part (its heartbeat is live and it is not draining). A member
// that owns nothing is ready: with more replicas than accounts some have
// nothing to do, and they stand by for a peer's death.
func (c *Coordinator) Ready() (owned []string, ok bool) {
	c.mu.Lock()
	live := c.now().Before(c.expires)
	c.mu.Unlock()
	return c.Owned(), live && !c.draining.Load()
}

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Drain is for SIGTERM: it stops claiming, deletes the member object, and
// releases every owned account at once (each after BeforeRelease, all
// concurrently), so that peers take them at their next rebalance. An
// account whose BeforeRelease fails (ctx done) stays owned and its lease
// expires with the process. Run returns once Drain finished.
func (c *Coordinator) Drain(ctx context.Context) error {
	c.draining.Store(true)
	c.drainOnce.Do(func() { close(c.drained) })
	defer c.doneOnce.Do(func() { close(c.drainDone) })
	// The record goes first: peers stop counting this member, and claim
	// each account as soon as its Release below lands.
	errLeave := c.leave(ctx)
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return errors.Join(errLeave, fmt.Errorf("drain member %s: waiting for the rebalance in flight: %w", c.id, ctx.Err()))
	}
	defer func() { <-c.turn }()

	owned := c.Owned()
	errs := make([]error, len(owned))
	var wg sync.WaitGroup
	for i, a := range owned {
		wg.Go(func() { errs[i] = c.release(ctx, a) })
	}
	wg.Wait()
	if len(owned) > 0 {
		c.changed()
	}
	c.log.Info("drained", zap.Int(logkey.Released, len(owned)-countErrs(errs)), zap.Strings(logkey.Kept, c.Owned()))
	return errors.Join(append(errs, errLeave)...)
}

func countErrs(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}

// rebalance runs one round of the algorithm in the package comment.
func (c *Coordinator) rebalance(ctx context.Context) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-c.turn }()
	if c.draining.Load() {
		return
	}
	c.count(func(s *Stats) { s.Rebalances++ })
	changed := c.forgetLost()
	defer func() {
		if changed {
			c.changed()
		}
	}()

	configured := make(map[string]bool)
	var accounts []string
	for _, a := range c.accounts() {
		if a != "" && !configured[a] {
			configured[a] = true
			accounts = append(accounts, a)
		}
	}
	for _, a := range c.Owned() {
		if !configured[a] {
			if c.release(ctx, a) == nil {
				changed = true
			}
		}
	}

	c.mu.Lock()
	live := c.now().Before(c.expires)
	c.mu.Unlock()
	if !live {
		// Peers may already count this member out: claim nothing, and
		// keep what is owned (the leases, renewed on their own, decide).
		return
	}
	view, err := c.members(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.fail("rebalance", err)
		}
		return
	}
	if _, ok := view[c.id]; !ok {
		return // the listing does not show this member's heartbeat yet
	}
	members := make([]string, 0, len(view))
	listed := make(map[string]bool) // accounts live peers own
	for id, rec := range view {
		members = append(members, id)
		if id != c.id {
			for _, a := range rec.Owned {
				listed[a] = true
			}
		}
	}
	slices.Sort(members)
	share := quota(len(accounts), members, c.id)
	c.count(func(s *Stats) { s.Members, s.Share = len(members), share })

	owned := c.Owned()
	switch {
	case len(owned) > share:
		// A member joined (or accounts went): hand back the surplus, the
		// accounts that prefer another member first.
		byPreference(owned, c.id, members)
		slices.Reverse(owned)
		for _, a := range owned[:len(owned)-share] {
			if c.release(ctx, a) == nil {
				changed = true
			}
		}
	case len(owned) < share:
		var free []string
		for _, a := range accounts {
			if !slices.Contains(owned, a) && !listed[a] {
				free = append(free, a)
			}
		}
		byPreference(free, c.id, members)
		for _, a := range free {
			if len(owned) >= share || c.draining.Load() || ctx.Err() != nil {
				break
			}
			if c.claim(ctx, a) {
				owned = append(owned, a)
				changed = true
			}
		}
	}
}

// claim takes account's lease and counts the account as owned.
func (c *Coordinator) claim(ctx context.Context, account string) bool {
	err := c.claimer.Claim(ctx, account)
	switch {
	case err != nil && c.isHeld(err):
		c.count(func(s *Stats) { s.Held++ })
		c.log.Debug("account held by a peer", zap.String(logkey.Account, account), zap.Error(err))
		return false
	case err != nil:
		if ctx.Err() == nil {
			c.fail("claim account "+account, err)
		}
		return false
	}
	gone := make(chan struct{})
	c.mu.Lock()
	c.owned[account] = gone
	c.stats.Claims++
	c.stats.LastClaim = c.now()
	c.mu.Unlock()
	c.log.Info("claimed account", zap.String(logkey.Account, account))
	if l, ok := c.claimer.(loser); ok {
		if lost := l.Lost(account); lost != nil {
			go c.watch(account, lost, gone)
		}
	}
	return true
}

// watch reports account lost if its lease is lost while it is owned.
func (c *Coordinator) watch(account string, lost <-chan struct{}, gone chan struct{}) {
	select {
	case <-lost:
	case <-gone:
		return
	}
	c.mu.Lock()
	if c.owned[account] == gone {
		delete(c.owned, account)
		close(gone)
		c.lostNew = true
		c.stats.Lost++
	}
	c.mu.Unlock()
	c.log.Warn("lost the lease of an account: a peer took it over", zap.String(logkey.Account, account))
	c.Refresh()
}

// forgetLost reports whether leases were lost since the last rebalance.
func (c *Coordinator) forgetLost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	lost := c.lostNew
	c.lostNew = false
	return lost
}

// release stops account's passes, stops counting it as owned, and
// releases its lease. A failed Release is logged, not retried: the
// passes have stopped, and the lease, no longer renewed, expires.
func (c *Coordinator) release(ctx context.Context, account string) error {
	if c.beforeRelease != nil {
		if err := c.beforeRelease(ctx, account); err != nil {
			err = fmt.Errorf("stop the passes of account %s before releasing it: %w", account, err)
			c.fail("release", err)
			return err
		}
	}
	c.mu.Lock()
	gone, ok := c.owned[account]
	if ok {
		delete(c.owned, account)
		close(gone)
		c.stats.Releases++
	}
	c.mu.Unlock()
	if !ok {
		return nil // lost meanwhile
	}
	if err := c.claimer.Release(account); err != nil {
		c.fail("release account "+account, err)
	} else {
		c.log.Info("released account", zap.String(logkey.Account, account))
	}
	return nil
}

// changed tells the daemon and the peers the new ownership.
func (c *Coordinator) changed() {
	select {
	case c.beatNow <- struct{}{}:
	default:
	}
	if c.onChange != nil {
		c.onChange(c.Owned())
	}
}

func (c *Coordinator) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

func (c *Coordinator) fail(what string, err error) {
	c.count(func(s *Stats) { s.Errors++ })
	c.log.Warn(what+" failed", zap.Error(err))
}
