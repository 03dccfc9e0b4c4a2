package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// Short intervals on a real bucket: a heartbeat every 100ms, members live
// for 300ms after their last one.
const (
	beat      = 100 * time.Millisecond
	memberTTL = 4 * beat // 3 would do; a slow write under -race should not end a member
	leaseTTL  = 600 * time.Millisecond
	eventual  = 20 * time.Second // generous: the race detector, a busy machine
)

// leaseTable is the fake lease store the members' Claimers share. It
// enforces exclusivity as the state's lease objects do (a Claim of an
// account a live holder has fails as held) and checks the Coordinator's
// use of it: no Claim of an account already held by the claimer, no
// Release of one it does not hold or whose passes were not stopped first.
type leaseTable struct {
	t       *testing.T
	ttl     time.Duration
	mu      sync.Mutex
	held    map[string]holding
	stopped map[string]bool // owner/account: BeforeRelease ran since the Claim
	stolen  map[string]bool // taken from a live holder by steal
}

type holding struct {
	owner   string
	expires time.Time
	lost    chan struct{}
}

type heldError struct{ account, owner string }

func (e *heldError) Error() string {
	return fmt.Sprintf("account %s is held by %s", e.account, e.owner)
}

func isHeld(err error) bool {
	var h *heldError
	return errors.As(err, &h)
}

func newLeaseTable(t *testing.T, ttl time.Duration) *leaseTable {
	return &leaseTable{t: t, ttl: ttl, held: make(map[string]holding), stopped: make(map[string]bool), stolen: make(map[string]bool)}
}

// claimer is one member's Claimer. Its leases are renewed until ctx (the
// member's life) ends; a killed member's leases then expire.
type claimer struct {
	tab   *leaseTable
	owner string
}

func (tab *leaseTable) claimer(ctx context.Context, owner string) *claimer {
	c := &claimer{tab: tab, owner: owner}
	go func() {
		t := time.NewTicker(tab.ttl / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			tab.mu.Lock()
			for a, h := range tab.held {
				if h.owner == owner {
					h.expires = time.Now().Add(tab.ttl)
					tab.held[a] = h
				}
			}
			tab.mu.Unlock()
		}
	}()
	return c
}

func (c *claimer) Claim(ctx context.Context, account string) error {
	tab := c.tab
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if h, ok := tab.held[account]; ok && time.Now().Before(h.expires) {
		if h.owner == c.owner {
			tab.t.Errorf("%s claims %s, which it holds", c.owner, account)
		}
		return &heldError{account, h.owner}
	}
	tab.held[account] = holding{owner: c.owner, expires: time.Now().Add(tab.ttl), lost: make(chan struct{})}
	delete(tab.stopped, c.owner+"/"+account)
	return nil
}

func (c *claimer) Release(account string) error {
	tab := c.tab
	tab.mu.Lock()
	defer tab.mu.Unlock()
	h, ok := tab.held[account]
	if !ok || h.owner != c.owner {
		tab.t.Errorf("%s releases %s, held by %q", c.owner, account, h.owner)
		return fmt.Errorf("%s does not hold %s", c.owner, account)
	}
	if !tab.stopped[c.owner+"/"+account] {
		tab.t.Errorf("%s releases %s before its passes stopped", c.owner, account)
	}
	delete(tab.held, account)
	return nil
}

// stop is the members' BeforeRelease: it records that the account's passes
// ended, after a pause as if a batch were finishing.
func (tab *leaseTable) stop(owner string) func(context.Context, string) error {
	return func(ctx context.Context, account string) error {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		tab.mu.Lock()
		tab.stopped[owner+"/"+account] = true
		tab.mu.Unlock()
		return nil
	}
}

// lostClaimer reports lost leases, as state.Sharded does.
type lostClaimer struct{ *claimer }

func (c lostClaimer) Lost(account string) <-chan struct{} {
	c.tab.mu.Lock()
	defer c.tab.mu.Unlock()
	if h, ok := c.tab.held[account]; ok && h.owner == c.owner {
		return h.lost
	}
	return nil
}

// steal gives account to owner as a peer that took over an expired lease
// would, and tells the old holder.
func (tab *leaseTable) steal(account, owner string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if h, ok := tab.held[account]; ok {
		close(h.lost)
	}
	tab.stolen[account] = true // its old holder counts it until it learns
	tab.held[account] = holding{owner: owner, expires: time.Now().Add(time.Hour), lost: make(chan struct{})}
}

// cluster is a set of members on one bucket, with the configured accounts
// they share.
type cluster struct {
	t        *testing.T
	url      string
	tab      *leaseTable
	ttl      time.Duration // member TTL
	lost     bool          // Claimers report lost leases
	accounts atomic.Pointer[[]string]

	mu    sync.Mutex
	nodes []*node
}

type node struct {
	c      *Coordinator
	holder string // its name in the lease table: the ID and an incarnation
	cancel context.CancelFunc
	done   chan error
	dead   atomic.Bool // killed: its Owned is stale
	change atomic.Int64
}

func newCluster(t *testing.T, scheme string, memberTTL, leaseTTL time.Duration, accounts []string) *cluster {
	l := lakes.Start(t, scheme)
	cl := &cluster{t: t, url: l.URL("syncd/state.members"), tab: newLeaseTable(t, leaseTTL), ttl: memberTTL}
	cl.setAccounts(accounts)
	// Watch ownership throughout: at no instant do two live members count
	// one account, and each counts only accounts whose lease it holds.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			cl.check()
			time.Sleep(2 * time.Millisecond)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, n := range cl.all() {
			n.kill()
		}
	})
	return cl
}

func (cl *cluster) setAccounts(accounts []string) { cl.accounts.Store(&accounts) }

func (cl *cluster) all() []*node {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.nodes)
}

func (cl *cluster) check() {
	tab := cl.tab
	tab.mu.Lock()
	defer tab.mu.Unlock()
	by := make(map[string]string)
	for _, n := range cl.all() {
		if n.dead.Load() {
			continue
		}
		for _, a := range n.c.Owned() {
			if tab.stolen[a] {
				continue
			}
			if other, ok := by[a]; ok {
				cl.t.Errorf("account %s owned by %s and %s at once", a, other, n.c.ID())
			}
			by[a] = n.c.ID()
			if h := tab.held[a]; h.owner != n.holder {
				cl.t.Errorf("%s counts %s as owned; its lease is held by %q", n.c.ID(), a, h.owner)
			}
		}
	}
}

// start starts a member named id.
func (cl *cluster) start(id string) *node {
	cl.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// Leases are per process, as the state's are: a member restarted
	// under its ID does not hold its previous incarnation's leases.
	cl.mu.Lock()
	holder := fmt.Sprintf("%s#%d", id, len(cl.nodes))
	cl.mu.Unlock()
	var cm Claimer = cl.tab.claimer(ctx, holder)
	if cl.lost {
		cm = lostClaimer{cm.(*claimer)}
	}
	n := &node{holder: holder, cancel: cancel, done: make(chan error, 1)}
	c, err := New(ctx, Options{
		Members:       cl.url,
		ID:            id,
		Heartbeat:     beat,
		TTL:           cl.ttl,
		Accounts:      func() []string { return *cl.accounts.Load() },
		Claimer:       cm,
		IsHeld:        isHeld,
		BeforeRelease: cl.tab.stop(holder),
		OnChange:      func([]string) { n.change.Add(1) },
		Logger:        zaptest.NewLogger(cl.t, zaptest.Level(zap.WarnLevel)),
	})
	if err != nil {
		cl.t.Fatal(err)
	}
	n.c = c
	go func() {
		err := c.Run(ctx)
		c.Close()
		n.done <- err
	}()
	cl.mu.Lock()
	cl.nodes = append(cl.nodes, n)
	cl.mu.Unlock()
	return n
}

// kill ends the member as a killed process ends: no Drain, its record and
// leases left to expire.
func (n *node) kill() {
	if n.dead.Swap(true) {
		return
	}
	n.cancel()
	<-n.done
}

// waitFair waits until the accounts are split among nodes, each within
// one of the fair share, and returns the split.
func (cl *cluster) waitFair(nodes ...*node) map[string][]string {
	cl.t.Helper()
	accounts := *cl.accounts.Load()
	fair := float64(len(accounts)) / float64(len(nodes))
	deadline := time.Now().Add(eventual)
	for {
		split := make(map[string][]string)
		var all []string
		ok := true
		for _, n := range nodes {
			owned := n.c.Owned()
			split[n.c.ID()] = owned
			all = append(all, owned...)
			if math.Abs(float64(len(owned))-fair) > 1 {
				ok = false
			}
		}
		slices.Sort(all)
		if ok && slices.Equal(all, sorted(accounts)) {
			return split
		}
		if time.Now().After(deadline) {
			cl.t.Fatalf("no fair split of %d accounts among %d members after %v: %s", len(accounts), len(nodes), eventual, show(split))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStable checks that a converged split stays put for a while: no
// member keeps claiming and releasing.
func (cl *cluster) waitStable(nodes ...*node) {
	cl.t.Helper()
	before := claims(nodes)
	time.Sleep(10 * beat)
	if after := claims(nodes); after != before {
		cl.t.Errorf("members kept claiming after they converged: %d claims, then %d", before, after)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventual)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, eventual)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func claims(nodes []*node) int64 {
	var n int64
	for _, nd := range nodes {
		n += nd.c.Stats().Claims
	}
	return n
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func show(split map[string][]string) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(split)) {
		fmt.Fprintf(&b, "\n  %s: %d %v", id, len(split[id]), split[id])
	}
	return b.String()
}

func accountNames(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("acct-%03d", i)
	}
	return s
}

// TestSplitAndJoin: three members split the accounts fairly; a fourth
// joins and the split is fair again, without an account ever counted by
// two members (cluster.check) or claimed from a live holder (leaseTable).
func TestSplitAndJoin(t *testing.T) {
	for _, scheme := range []string{"gs", "s3"} {
		t.Run(scheme, func(t *testing.T) {
			cl := newCluster(t, scheme, memberTTL, leaseTTL, accountNames(22))
			a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
			split := cl.waitFair(a, b, c)
			t.Logf("3 members: %s", show(split))
			cl.waitStable(a, b, c)

			d := cl.start("d")
			split2 := cl.waitFair(a, b, c, d)
			t.Logf("4 members: %s", show(split2))
			cl.waitStable(a, b, c, d)
			moved := 0
			for _, id := range []string{"a", "b", "c"} {
				for _, acct := range split[id] {
					if !slices.Contains(split2[id], acct) {
						moved++
					}
				}
			}
			// d takes 5 or 6; the others hand back only what d took.
			if moved != len(split2["d"]) {
				t.Errorf("%d accounts moved for d's %d", moved, len(split2["d"]))
			}
			for _, n := range []*node{a, b, c, d} {
				eventually(t, n.c.ID()+" ready", func() bool { _, ok := n.c.Ready(); return ok })
				t.Logf("%s: %+v", n.c.ID(), n.c.Stats())
			}
		})
	}
}

// TestKilledMemberTakenOver: a member that stops without draining loses
// its accounts to the others once its record and its leases expired.
func TestKilledMemberTakenOver(t *testing.T) {
	cl := newCluster(t, "gs", memberTTL, leaseTTL, accountNames(12))
	a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
	split := cl.waitFair(a, b, c)
	if len(split["c"]) == 0 {
		t.Fatal("c owns nothing to take over")
	}
	orphans := split["c"]
	killed := time.Now()
	c.kill()
	split = cl.waitFair(a, b)
	last := killed
	for _, n := range []*node{a, b} {
		if at := n.c.Stats().LastClaim; at.After(last) {
			last = at
		}
	}
	t.Logf("c's %d accounts taken over %v after its death (bound: max(member TTL %v, lease TTL %v) + heartbeat %v + a rebalance): %s",
		len(orphans), last.Sub(killed).Round(time.Millisecond), memberTTL, leaseTTL, beat, show(split))
	cl.waitStable(a, b)
}

// TestRestartKeepsAccounts: a member that restarts under the same ID
// (a StatefulSet pod) before its record expired takes its own record
// over and gets its accounts back once its old leases expired; its peers,
// still counting it, leave them alone.
func TestRestartKeepsAccounts(t *testing.T) {
	cl := newCluster(t, "gs", 2*time.Second, leaseTTL, accountNames(12))
	a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
	before := cl.waitFair(a, b, c)
	c.kill()
	c2 := cl.start("c")
	after := cl.waitFair(a, b, c2)
	for _, id := range []string{"a", "b", "c"} {
		if !slices.Equal(before[id], after[id]) {
			t.Errorf("%s owned %v before c restarted, %v after", id, before[id], after[id])
		}
	}
	if got := c2.c.Stats().Held; got == 0 {
		t.Error("the restarted member never found its old leases held")
	}
}

// TestDrainHandsOver: a drained member deletes its record and releases
// its accounts at once; the others take them long before the TTLs (here a
// minute) would have let them.
func TestDrainHandsOver(t *testing.T) {
	cl := newCluster(t, "gs", time.Minute, time.Minute, accountNames(12))
	a, b, c := cl.start("a"), cl.start("b"), cl.start("c")
	cl.waitFair(a, b, c)

	ctx, cancel := context.WithTimeout(context.Background(), eventual)
	defer cancel()
	owned, released := c.c.Owned(), c.c.Stats().Releases
	if err := c.c.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if owned, ok := c.c.Ready(); ok || len(owned) != 0 {
		t.Errorf("drained member: ready %v, owns %v", ok, owned)
	}
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("Run after Drain: %v", err)
		}
		c.dead.Store(true)
	case <-time.After(eventual):
		t.Fatal("Run did not return after Drain")
	}
	start := time.Now()
	cl.waitFair(a, b)
	t.Logf("drained member's accounts taken in %v", time.Since(start).Round(time.Millisecond))
	if got := c.c.Stats().Releases - released; got != int64(len(owned)) {
		t.Errorf("Drain released %d accounts of the %d owned", got, len(owned))
	}
}

// TestAccountsChange: accounts added by a reload are claimed and split;
// removed ones are released (after their passes stopped) and stay free.
func TestAccountsChange(t *testing.T) {
	cl := newCluster(t, "gs", memberTTL, leaseTTL, accountNames(6))
	a, b := cl.start("a"), cl.start("b")
	cl.waitFair(a, b)

	cl.setAccounts(accountNames(10))
	a.c.Refresh()
	b.c.Refresh()
	cl.waitFair(a, b)

	kept := accountNames(10)[5:]
	cl.setAccounts(kept)
	cl.waitFair(a, b)
	cl.waitStable(a, b)
	cl.tab.mu.Lock()
	for _, acct := range accountNames(5) {
		if h, ok := cl.tab.held[acct]; ok {
			t.Errorf("removed account %s still held by %s", acct, h.owner)
		}
	}
	cl.tab.mu.Unlock()
	if a.change.Load() == 0 || b.change.Load() == 0 {
		t.Error("OnChange was not called")
	}
}

// TestLostLease: a lease a peer took over (reported by the Claimer's Lost)
// is forgotten without a Release; once free again it is claimed back.
func TestLostLease(t *testing.T) {
	cl := newCluster(t, "gs", memberTTL, leaseTTL, accountNames(4))
	cl.lost = true
	a := cl.start("a")
	cl.waitFair(a)

	cl.tab.steal("acct-001", "intruder")
	eventually(t, "forgotten a lost account", func() bool { return !slices.Contains(a.c.Owned(), "acct-001") })
	if got := a.c.Stats().Lost; got != 1 {
		t.Errorf("Stats.Lost = %d, want 1", got)
	}
	cl.tab.mu.Lock()
	delete(cl.tab.held, "acct-001")
	cl.tab.mu.Unlock()
	cl.waitFair(a)
}

func TestQuota(t *testing.T) {
	for n := range 30 {
		for m := 1; m <= 7; m++ {
			members := accountNames(m)
			sum := 0
			for _, id := range members {
				q := quota(n, members, id)
				if q != n/m && q != n/m+1 {
					t.Fatalf("quota(%d, %d members) = %d", n, m, q)
				}
				sum += q
			}
			if sum != n {
				t.Fatalf("%d accounts on %d members: shares add up to %d", n, m, sum)
			}
		}
	}
	if q := quota(5, []string{"a", "b"}, "c"); q != 0 {
		t.Errorf("a member missing from the view got a share of %d", q)
	}
}

// TestRendezvous: each account prefers exactly one member, preferences
// spread evenly, and a member joining takes accounts only for itself.
func TestRendezvous(t *testing.T) {
	accounts := accountNames(2000)
	three := []string{"pod-0", "pod-1", "pod-2"}
	four := append(slices.Clone(three), "pod-3")
	prefer := func(a string, members []string) string {
		for _, m := range members {
			if rank(a, m, members) == 0 {
				return m
			}
		}
		t.Fatalf("account %s prefers none of %v", a, members)
		return ""
	}
	count := make(map[string]int)
	for _, a := range accounts {
		p3, p4 := prefer(a, three), prefer(a, four)
		count[p4]++
		if p4 != p3 && p4 != "pod-3" {
			t.Fatalf("account %s moved from %s to %s when pod-3 joined", a, p3, p4)
		}
	}
	for m, n := range count {
		if n < 400 || n > 600 {
			t.Errorf("%s is preferred by %d of 2000 accounts", m, n)
		}
	}
	s := slices.Clone(accounts[:50])
	byPreference(s, "pod-1", four)
	for i := 1; i < len(s); i++ {
		if rank(s[i-1], "pod-1", four) > rank(s[i], "pod-1", four) {
			t.Fatal("byPreference does not put the accounts that prefer the member first")
		}
	}
}

func TestMembersURL(t *testing.T) {
	for in, want := range map[string]string{
		"gs://b/syncd/state":                        "gs://b/syncd/state.members",
		"s3://b/state/?endpoint=http%3A%2F%2Fh%3A1": "s3://b/state.members?endpoint=http%3A%2F%2Fh%3A1",
		"file:///var/lib/syncd/state":               "file:///var/lib/syncd/state.members",
	} {
		if got, err := MembersURL(in); err != nil || got != want {
			t.Errorf("MembersURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := MembersURL("gs://b"); err == nil {
		t.Error("MembersURL of a bucket's root succeeded")
	}
}
