package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func openShardedT(t *testing.T, opts ShardedOptions, claim ...string) *Sharded {
	t.Helper()
	s, err := OpenSharded(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, ns := range claim {
		if err := s.Claim(context.Background(), ns); err != nil {
			t.Fatalf("claim %q: %v", ns, err)
		}
	}
	return s
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestShardedDisjointClaims: two processes claim disjoint accounts of one
// bucket and write them at once, without a conflict; each reads the
// other's accounts, and a third lists every account once.
func TestShardedDisjointClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a := openShardedT(t, ShardedOptions{URL: url}, "", "acme")
		b := openShardedT(t, ShardedOptions{URL: url}, "beta", "gamma")
		if got := a.Owned(); !slices.Equal(got, []string{"", "acme"}) {
			t.Fatalf("a owns %q", got)
		}
		const commits = 8
		var wg sync.WaitGroup
		errs := make(chan error, 4*commits)
		for _, w := range []struct {
			s       *Sharded
			key, ns string
		}{{a, "f0", ""}, {a, "acme/f1", "acme/"}, {b, "beta/f2", "beta/"}, {b, "gamma/scheduling/bookings", "gamma/"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range commits {
					if err := w.s.Commit(ctx, w.key, Commit{Window: win(i), Rows: 1}); err != nil {
						errs <- fmt.Errorf("%s: %w", w.key, err)
						return
					}
				}
				if err := w.s.PutSecret(ctx, w.ns+"scheduling/oauth", []byte(w.key)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Each reads what the other wrote, afresh.
		if st, err := a.Get(ctx, "beta/f2"); err != nil || st.Rows != commits {
			t.Fatalf("a reads beta/f2 as %+v, %v", st, err)
		}
		if v, err := b.GetSecret(ctx, "acme/scheduling/oauth"); err != nil || string(v) != "acme/f1" {
			t.Fatalf("b reads acme's secret as %q, %v", v, err)
		}
		ro := openShardedT(t, ShardedOptions{URL: url, ReadOnly: true})
		list, err := ro.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"acme/f1", "beta/f2", "f0", "gamma/scheduling/bookings"}
		if got := formIDsOf(list); !slices.Equal(got, want) {
			t.Fatalf("List = %q, want %q", got, want)
		}
		for _, st := range list {
			if st.Rows != commits || !st.Committed.Covers(Interval{Start: win(0).Start, End: win(commits - 1).End}) {
				t.Errorf("%s: %+v", st.Key, st)
			}
		}
		if err := ro.Claim(ctx, "acme"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("a read-only store's claim: %v", err)
		}
		if err := ro.SetError(ctx, "f0", "x"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("a read-only store's write: %v", err)
		}
	})
}

func formIDsOf(list []StreamState) []string {
	out := make([]string, len(list))
	for i, st := range list {
		out[i] = st.Key
	}
	return out
}

// TestShardedNotClaimed: a write to an account this process did not claim
// fails naming the account and its holder, and changes nothing.
func TestShardedNotClaimed(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a := openShardedT(t, ShardedOptions{URL: url}, "acme")
		b := openShardedT(t, ShardedOptions{URL: url})
		err := b.SetError(ctx, "acme/f1", "x")
		var nc *NotClaimedError
		if !errors.As(err, &nc) || nc.Namespace != "acme" || nc.Holder == nil || !strings.HasSuffix(strings.SplitN(nc.URL, "?", 2)[0], "syncd-state.accounts/acme") {
			t.Fatalf("a write to an account claimed elsewhere: %v (%+v)", err, nc)
		}
		for _, want := range []string{"account acme is not claimed by this syncd", "its lease is held by pid", "claim it first"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		// Nobody's: the default account, and a secret of an account.
		if err := b.PutSecret(ctx, "scheduling/oauth", []byte("t")); !errors.As(err, &nc) || nc.Namespace != "" || nc.Holder != nil || !strings.Contains(err.Error(), "the default account is not claimed") || !strings.Contains(err.Error(), "no syncd holds its lease") {
			t.Fatalf("a write to the default account, unclaimed: %v", err)
		}
		if err := a.PutSecret(ctx, "beta/scheduling/oauth", []byte("t")); !errors.As(err, &nc) || nc.Namespace != "beta" {
			t.Fatalf("a secret of an unclaimed account: %v", err)
		}
		if err := a.SetError(ctx, "Bad/f", "x"); err == nil || !strings.Contains(err.Error(), "not an account name") {
			t.Fatalf("a key naming no account: %v", err)
		}
		if err := a.Claim(ctx, "Bad.name"); err == nil {
			t.Fatal("claimed an account name that cannot name an object")
		}
		if st, err := a.Get(ctx, "acme/f1"); err != nil || st.LastError != "" {
			t.Fatalf("the refused write landed: %+v, %v", st, err)
		}
		if list, err := b.List(ctx); err != nil || len(list) != 0 {
			t.Fatalf("List = %v, %v", formIDsOf(list), err)
		}
	})
}

// TestShardedSameAccount: a second process's claim of an account held by
// a live one fails naming it; once released, it is claimed at once and
// the state carries over; Lost is closed by the release.
func TestShardedSameAccount(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a := openShardedT(t, ShardedOptions{URL: url}, "acme")
		if err := a.Claim(ctx, "acme"); err != nil {
			t.Fatalf("a claim of an account held already: %v", err)
		}
		if err := a.SetError(ctx, "acme/f1", "from a"); err != nil {
			t.Fatal(err)
		}
		b := openShardedT(t, ShardedOptions{URL: url})
		err := b.Claim(ctx, "acme")
		var le *LockedError
		if !errors.As(err, &le) || le.Holder == nil || le.LeaseExpires.IsZero() || !strings.Contains(err.Error(), "claim account acme") {
			t.Fatalf("a second claim of acme: %v", err)
		}
		if len(b.Owned()) != 0 {
			t.Fatalf("b owns %q after a refused claim", b.Owned())
		}
		lost := a.Lost("acme")
		if isClosed(lost) {
			t.Fatal("Lost is closed while the lease is held")
		}
		if !isClosed(a.Lost("beta")) {
			t.Fatal("Lost of an account never claimed is open")
		}
		if err := a.Release("acme"); err != nil {
			t.Fatal(err)
		}
		if !isClosed(lost) {
			t.Fatal("Lost is open after the release")
		}
		if err := a.SetError(ctx, "acme/f1", "late"); !errors.As(err, new(*NotClaimedError)) {
			t.Fatalf("a write after the release: %v", err)
		}
		if err := b.Claim(ctx, "acme"); err != nil {
			t.Fatalf("claim after the release: %v", err)
		}
		if st, _ := b.Get(ctx, "acme/f1"); st.LastError != "from a" {
			t.Fatalf("b reads %+v", st)
		}
		if err := b.SetError(ctx, "acme/f1", "from b"); err != nil {
			t.Fatal(err)
		}
		// Close lets go of every lease: a claims both at once.
		if err := b.Claim(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"", "acme"} {
			if err := a.Claim(ctx, ns); err != nil {
				t.Fatalf("claim %q after the holder closed: %v", ns, err)
			}
		}
	})
}

// TestShardedFence: a holder whose lease expired and was taken over, but
// whose clock says it still runs, can commit nothing once the new holder
// claimed, though the new holder has written nothing itself yet; the
// stale holder learns it lost the lease and its Close leaves the new
// holder's lease alone.
func TestShardedFence(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		ttl := time.Hour // no renewal ticks: the clocks move by hand
		clkA, clkB := newClock(), newClock()
		a := openShardedT(t, ShardedOptions{URL: url, LeaseTTL: ttl, Now: clkA.now}, "acme", "")
		if err := a.RecordIntent(ctx, "acme/f1", Intent{BatchID: "b1", Start: win(0).Start, End: win(0).End}); err != nil {
			t.Fatal(err)
		}
		if err := a.SetError(ctx, "f0", "from a"); err != nil {
			t.Fatal(err)
		}
		clkB.add(2 * ttl) // a stalled past its lease, by b's clock only
		b := openShardedT(t, ShardedOptions{URL: url, LeaseTTL: ttl, Now: clkB.now})
		if err := b.Claim(ctx, "acme"); err != nil {
			t.Fatalf("take over an expired lease: %v", err)
		}
		// a wakes up believing its lease valid and commits its batch.
		var ce *ConflictError
		if err := a.Commit(ctx, "acme/f1", Commit{BatchID: "b1", Window: win(0), Rows: 5}); !errors.As(err, &ce) {
			t.Fatalf("the stale holder's commit after the fence: %v, want a *ConflictError", err)
		}
		if err := a.SetError(ctx, "acme/other", "x"); err == nil {
			t.Fatal("the stale holder wrote after losing the compare-and-swap")
		}
		// The account a still holds is unaffected.
		if err := a.SetError(ctx, "f0", "a again"); err != nil {
			t.Fatalf("a write to the account a still holds: %v", err)
		}
		st, err := b.Get(ctx, "acme/f1")
		if err != nil || st.Batches != 0 || len(st.Intents) != 1 {
			t.Fatalf("the state after the fence: %+v, %v; want the intent open and nothing committed", st, err)
		}
		// a's renewal finds the lease taken: Lost closes, Owned drops it.
		if err := a.owned["acme"].obj.lease.renewOnce(ctx); err == nil {
			t.Fatal("the stale holder renewed a lease taken over")
		}
		select {
		case <-a.Lost("acme"):
		case <-time.After(5 * time.Second):
			t.Fatal("Lost is open after the lease was taken over")
		}
		if got := a.Owned(); !slices.Equal(got, []string{""}) {
			t.Fatalf("a owns %q after losing acme", got)
		}
		if err := a.Release("acme"); err != nil {
			t.Fatal(err)
		}
		var le *LockedError
		c := openShardedT(t, ShardedOptions{URL: url, LeaseTTL: ttl, Now: clkB.now})
		if err := c.Claim(ctx, "acme"); !errors.As(err, &le) {
			t.Fatalf("b's lease is gone after a released its lost one: %v", err)
		}
		if err := b.Commit(ctx, "acme/f1", Commit{BatchID: "b1", Window: win(0), Rows: 5}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestObjectFenceRetries: a fence that meets a write landed since its
// store read the object reads it again; the next fence lands, and the
// other writer then commits nothing.
func TestObjectFenceRetries(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		old := openT(t, ObjectOptions{URL: url}, false)
		fencer := openT(t, ObjectOptions{URL: url}, false)
		if err := old.SetError(ctx, "f", "late write"); err != nil {
			t.Fatal(err)
		}
		var ce *ConflictError
		if err := fencer.fence(ctx, nil); !errors.As(err, &ce) {
			t.Fatalf("a fence over a stale read: %v", err)
		}
		if err := fencer.fence(ctx, nil); err != nil {
			t.Fatalf("the fence after reading again: %v", err)
		}
		if st, _ := fencer.Get(ctx, "f"); st.LastError != "late write" {
			t.Fatalf("the fence lost the write it met: %+v", st)
		}
		if err := old.SetError(ctx, "f", "after"); !errors.As(err, &ce) {
			t.Fatalf("a write after the fence: %v", err)
		}
		if err := fencer.SetError(ctx, "g", "x"); err != nil {
			t.Fatalf("the fencer's own write: %v", err)
		}
	})
}

// TestShardedMigration: the state the build before sharding wrote, one
// object holding every account, reads as it is; an account's first claim
// moves its records, index and secrets into its own object, which is its
// truth from then on (List and Get show it once); a claim of the default
// account then drops the moved copies, and an account not claimed yet is
// still read from the default object.
func TestShardedMigration(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		prev := openT(t, ObjectOptions{URL: url}, true)
		idx := &IndexChange{Put: []Entry{{ID: "r1", Version: Version{Time: win(0).Start, Hash: 1}}, {ID: "r2", Version: Version{Time: win(1).Start, Hash: 2}}}}
		for _, id := range []string{"f0", "acme/f1", "beta/f2", "scheduling/bookings", "acme/scheduling/bookings"} {
			if err := prev.Commit(ctx, id, Commit{BatchID: "b", Window: win(0), Rows: 2, Index: idx}); err != nil {
				t.Fatal(err)
			}
		}
		if err := prev.RecordIntent(ctx, "acme/f1", Intent{BatchID: "open", Start: win(1).Start, End: win(1).End, Index: &IndexChange{Put: []Entry{{ID: "r3", Version: Version{Time: win(1).Start, Hash: 3}}}}}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"scheduling/oauth", "acme/scheduling/oauth", "beta/scheduling/oauth"} {
			if err := prev.PutSecret(ctx, name, []byte("tok "+name)); err != nil {
				t.Fatal(err)
			}
		}
		// While the build before sharding runs, it owns every account.
		early := openShardedT(t, ShardedOptions{URL: url})
		for _, ns := range []string{"acme", ""} {
			var le *LockedError
			if err := early.Claim(ctx, ns); !errors.As(err, &le) || le.Holder == nil {
				t.Fatalf("claim %q while the previous build holds the state: %v, want a *LockedError", ns, err)
			}
		}
		if err := prev.Close(); err != nil {
			t.Fatal(err)
		}
		all := []string{"acme/f1", "acme/scheduling/bookings", "beta/f2", "f0", "scheduling/bookings"}
		listed := func(s *Sharded, what string) []StreamState {
			t.Helper()
			list, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := formIDsOf(list); !slices.Equal(got, all) {
				t.Fatalf("%s: List = %q, want %q", what, got, all)
			}
			return list
		}
		versions := func(s *Sharded, id string) int {
			t.Helper()
			n := 0
			if err := s.Versions(ctx, id, win(0).Start, win(9).End, func(Entry) error { n++; return nil }); err != nil {
				t.Fatalf("Versions(%s): %v", id, err)
			}
			return n
		}

		ro := openShardedT(t, ShardedOptions{URL: url, ReadOnly: true})
		listed(ro, "before any claim")
		if v, err := ro.GetSecret(ctx, "acme/scheduling/oauth"); err != nil || string(v) != "tok acme/scheduling/oauth" {
			t.Fatalf("acme's secret before its claim: %q, %v", v, err)
		}
		if n := versions(ro, "acme/f1"); n != 2 {
			t.Fatalf("acme/f1's index before its claim holds %d records", n)
		}

		a := openShardedT(t, ShardedOptions{URL: url}, "acme")
		if st, err := a.Get(ctx, "acme/f1"); err != nil || st.Rows != 2 || len(st.Intents) != 1 || st.Indexed != 2 {
			t.Fatalf("acme/f1 after its claim: %+v, %v", st, err)
		}
		if v, err := a.GetSecret(ctx, "acme/scheduling/oauth"); err != nil || string(v) != "tok acme/scheduling/oauth" {
			t.Fatalf("acme's secret after its claim: %q, %v", v, err)
		}
		// The open intent's index change moved too: its commit applies it.
		if err := a.Commit(ctx, "acme/f1", Commit{BatchID: "open", Window: win(1), Rows: 1}); err != nil {
			t.Fatal(err)
		}
		if n := versions(a, "acme/f1"); n != 3 {
			t.Fatalf("acme/f1's index after its open batch committed holds %d records, want 3", n)
		}
		if err := a.PutSecret(ctx, "acme/scheduling/oauth", []byte("rotated")); err != nil {
			t.Fatal(err)
		}
		// The default object still holds the copy; nobody sees it.
		for _, s := range []*Sharded{a, ro} {
			for _, st := range listed(s, "after acme's claim") {
				if st.Key == "acme/f1" && st.Rows != 3 {
					t.Fatalf("List shows acme/f1's old copy: %+v", st)
				}
			}
			if v, _ := s.GetSecret(ctx, "acme/scheduling/oauth"); string(v) != "rotated" {
				t.Fatalf("acme's secret reads %q", v)
			}
		}
		if st, _ := ro.Get(ctx, "acme/f1"); st.Rows != 3 {
			t.Fatalf("Get shows acme/f1's old copy: %+v", st)
		}

		// The default account's claim drops acme's copies, not beta's.
		d := openShardedT(t, ShardedOptions{URL: url}, "")
		root := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false)
		for id, want := range map[string]bool{"acme/f1": false, "acme/scheduling/bookings": false, "beta/f2": true, "f0": true, "scheduling/bookings": true} {
			if _, ok := root.doc.Forms[id]; ok != want {
				t.Errorf("after the default claim, the default object holds %s: %v, want %v", id, ok, want)
			}
			if _, ok := root.doc.Index[id]; ok != want {
				t.Errorf("after the default claim, the default object indexes %s: %v, want %v", id, ok, want)
			}
		}
		if _, ok := root.doc.Secrets["acme/scheduling/oauth"]; ok {
			t.Error("the default object still holds acme's secret")
		}
		if _, ok := root.doc.Secrets["beta/scheduling/oauth"]; !ok {
			t.Error("the default object lost beta's secret before beta moved")
		}
		listed(d, "after the default claim")
		// acme's index does not depend on the objects dropped.
		if n := versions(ro, "acme/f1"); n != 3 {
			t.Fatalf("acme/f1's index after the default claim holds %d records", n)
		}
		if n := versions(ro, "beta/f2"); n != 2 {
			t.Fatalf("beta/f2's index, still in the default object, holds %d records", n)
		}
		// beta moves while another process holds the default account.
		if err := a.Claim(ctx, "beta"); err != nil {
			t.Fatal(err)
		}
		if n := versions(a, "beta/f2"); n != 2 {
			t.Fatalf("beta/f2's index after its claim holds %d records", n)
		}
		if err := a.Commit(ctx, "beta/f2", Commit{Window: win(5), Rows: 7}); err != nil {
			t.Fatal(err)
		}
		for _, st := range listed(d, "after beta's claim") {
			if st.Key == "beta/f2" && st.Rows != 9 {
				t.Fatalf("List shows beta/f2's old copy: %+v", st)
			}
		}
	})
}

// TestShardedMigrationKeepsDamage: a damaged record of an account in the
// single object moves damaged: that stream alone fails, naming itself,
// until it is reset; the account's other stream moves whole.
func TestShardedMigrationKeepsDamage(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		prev := openT(t, ObjectOptions{URL: url}, true)
		for _, id := range []string{"acme/f1", "acme/f2"} {
			if err := prev.Commit(ctx, id, Commit{BatchID: "b", Window: win(0), Rows: 2}); err != nil {
				t.Fatal(err)
			}
		}
		if err := prev.Close(); err != nil {
			t.Fatal(err)
		}
		// One bit of acme/f1's rows flipped at rest.
		root := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false)
		raw, err := root.bucket.ReadAll(ctx, root.key)
		if err != nil {
			t.Fatal(err)
		}
		at := strings.Index(string(raw), `"form_id":"acme/f1"`)
		at += strings.Index(string(raw[at:]), `"rows":`) + len(`"rows":`)
		raw[at] ^= 1
		if err := root.bucket.WriteAll(ctx, root.key, raw, nil); err != nil {
			t.Fatal(err)
		}

		a := openShardedT(t, ShardedOptions{URL: url}, "acme")
		var ce *CorruptError
		if _, err := a.Get(ctx, "acme/f1"); !errors.As(err, &ce) || ce.Form != "acme/f1" || !strings.Contains(ce.Path, "syncd-state.accounts/acme") {
			t.Fatalf("Get of the damaged record after the move: %v", err)
		}
		if err := a.SetError(ctx, "acme/f1", "x"); !errors.As(err, &ce) {
			t.Fatalf("a write over the damaged record: %v", err)
		}
		if st, err := a.Get(ctx, "acme/f2"); err != nil || st.Rows != 2 {
			t.Fatalf("the other stream after the move: %+v, %v", st, err)
		}
		list, err := a.List(ctx)
		if err != nil || len(list) != 2 || list[0].Damaged == "" || list[1].Damaged != "" {
			t.Fatalf("List after the move: %+v, %v", list, err)
		}
		if err := a.Reset(ctx, "acme/f1"); err != nil {
			t.Fatal(err)
		}
		if st, err := a.Get(ctx, "acme/f1"); err != nil || st.Generation != 1 {
			t.Fatalf("after the reset: %+v, %v", st, err)
		}
	})
}
