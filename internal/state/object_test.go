package state

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

var ot0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// eachStore runs fn once per object store (fake-gcs-server, versitygw,
// Azurite), with a state URL in a fresh bucket of it.
func eachStore(t *testing.T, fn func(t *testing.T, url string)) {
	for _, scheme := range lakes.Schemes {
		t.Run(scheme, func(t *testing.T) {
			fn(t, lakes.Start(t, scheme).URL("team/syncd-state"))
		})
	}
}

// clock is a settable clock for leases: no test waits on the wall clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock          { c := &clock{}; c.ns.Store(ot0.UnixNano()); return c }
func (c *clock) now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) {
	c.ns.Add(int64(d))
}

func openT(t *testing.T, opts ObjectOptions, withLease bool) *Object {
	t.Helper()
	o, err := openObject(context.Background(), opts, withLease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func win(h int) Interval {
	return Interval{Start: ot0.Add(time.Duration(h) * time.Hour), End: ot0.Add(time.Duration(h+1) * time.Hour)}
}

func TestObjectRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		o := openT(t, ObjectOptions{URL: url}, true)
		steps := []struct {
			name string
			do   func() error
		}{
			{"intent", func() error {
				return o.RecordIntent(ctx, "f1", Intent{BatchID: "b1", Start: win(0).Start, End: win(0).End})
			}},
			{"commit", func() error {
				return o.Commit(ctx, "f1", Commit{BatchID: "b1", Window: win(0), Rows: 3, Schema: []byte(`{"v":1}`)})
			}},
			{"replayed commit", func() error { return o.Commit(ctx, "f1", Commit{BatchID: "b1", Window: win(0), Rows: 3}) }},
			{"second intent", func() error {
				return o.RecordIntent(ctx, "f1", Intent{BatchID: "b2", Start: win(1).Start, End: win(1).End})
			}},
			{"error", func() error { return o.SetError(ctx, "f2", "boom") }},
			{"reset f2", func() error { return o.Reset(ctx, "f2") }},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		// A new store (the lease was released: no wait) reads it all back.
		r := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false)
		list, err := r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[1].Key != "f2" || list[1].Generation != 1 || len(list[1].Committed) != 0 || list[1].LastError != "" {
			t.Fatalf("forms %+v, want f1 and f2 reset to generation 1", list)
		}
		st := list[0]
		if st.Rows != 3 || st.Batches != 1 || !st.Committed.Covers(win(0)) || string(st.Schema) != `{"v":1}` {
			t.Fatalf("state %+v", st)
		}
		if _, open := st.Intents["b2"]; !open || len(st.Intents) != 1 {
			t.Fatalf("intents %v, want b2 open", st.Intents)
		}
		if err := r.SetError(ctx, "f1", "x"); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("read-only write: %v", err)
		}
		if _, err := OpenObject(ctx, ObjectOptions{URL: url}); err != nil {
			t.Fatalf("reopen after release: %v", err)
		}
	})
}

// TestObjectCompareAndSwapRace: two writers that read the same generation
// race; exactly one write lands, the loser fails with a ConflictError, keeps
// failing, and nothing the winner wrote is lost.
func TestObjectCompareAndSwapRace(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		const writers = 4
		stores := make([]*Object, writers)
		for i := range stores {
			stores[i] = openT(t, ObjectOptions{URL: url}, false) // no lease: the race itself
		}
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i, o := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = o.Commit(ctx, "f1", Commit{Window: win(i), Rows: 10 + i})
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			var ce *ConflictError
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("writers %d and %d both advanced the state", winner, i)
				}
				winner = i
			case errors.As(err, &ce):
				if !strings.Contains(err.Error(), "changed by another syncd") {
					t.Errorf("conflict says %q", err)
				}
				// The loser writes nothing ever after, even what would not conflict.
				if err := stores[i].SetError(ctx, "other", "x"); !errors.As(err, &ce) {
					t.Errorf("writer %d wrote after losing: %v", i, err)
				}
			default:
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		// The winner goes on; a fresh reader sees exactly its writes.
		if err := stores[winner].Commit(ctx, "f1", Commit{Window: win(10), Rows: 1}); err != nil {
			t.Fatal(err)
		}
		st, err := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false).Get(ctx, "f1")
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(10 + winner + 1); st.Rows != want || !st.Committed.Covers(win(winner)) || !st.Committed.Covers(win(10)) {
			t.Fatalf("state %+v, want the winner's %d rows", st, want)
		}
		if other, _ := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false).Get(ctx, "other"); other.LastError != "" {
			t.Fatalf("a loser's write landed: %+v", other)
		}
	})
}

// TestObjectLeaseTakeover: a second writer is refused while the first
// holds the lease, takes it over once it expires, and the first (stalled,
// not renewing) can then write nothing.
func TestObjectLeaseTakeover(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		clk := newClock()
		ttl := time.Hour // renewals never tick during the test; the clock is moved by hand
		a := openT(t, ObjectOptions{URL: url, LeaseTTL: ttl, Now: clk.now}, true)
		if err := a.SetError(ctx, "f1", "from a"); err != nil {
			t.Fatal(err)
		}

		_, err := OpenObject(ctx, ObjectOptions{URL: url, LeaseTTL: ttl, Now: clk.now})
		var le *LockedError
		if !errors.As(err, &le) || le.Holder == nil || !le.LeaseExpires.Equal(ot0.Add(ttl)) {
			t.Fatalf("second writer while the lease is held: %v", err)
		}
		if !strings.Contains(err.Error(), "in use by another syncd") || !strings.Contains(err.Error(), "lease runs until") {
			t.Errorf("message %q", err)
		}

		// a renews once, half-way, then stalls; its lease runs out.
		clk.add(ttl / 2)
		if err := a.lease.renewOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clk.add(ttl/2 + time.Second) // past the first expiry, not the renewed one
		_, err = OpenObject(ctx, ObjectOptions{URL: url, LeaseTTL: ttl, Now: clk.now})
		if !errors.As(err, &le) {
			t.Fatalf("the renewed lease was taken before it expired: %v", err)
		}
		clk.add(ttl)
		b, err := OpenObject(ctx, ObjectOptions{URL: url, LeaseTTL: ttl, Now: clk.now})
		if err != nil {
			t.Fatalf("take over an expired lease: %v", err)
		}
		defer b.Close()
		if st, _ := b.Get(ctx, "f1"); st.LastError != "from a" {
			t.Fatalf("the new holder does not see a's state: %+v", st)
		}
		select {
		case <-b.Lost():
			t.Fatal("the new holder's Lost channel is closed")
		default:
		}
		if err := b.SetError(ctx, "f1", "from b"); err != nil {
			t.Fatal(err)
		}
		// a wakes up: its lease expired, its renewal finds the lease taken.
		if err := a.SetError(ctx, "f1", "late a"); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("a wrote after its lease expired: %v", err)
		}
		if err := a.lease.renewOnce(ctx); err == nil || !strings.Contains(err.Error(), "taken over") {
			t.Fatalf("a's renewal after the takeover: %v", err)
		}
		select {
		case <-a.Lost():
		default:
			t.Fatal("a's Lost channel is open after its lease expired")
		}
		if st, _ := b.Get(ctx, "f1"); st.LastError != "from b" {
			t.Fatalf("state %+v", st)
		}
		// a's Close must not delete b's lease.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenObject(ctx, ObjectOptions{URL: url, LeaseTTL: ttl, Now: clk.now}); !errors.As(err, &le) {
			t.Fatalf("b's lease is gone after a closed: %v", err)
		}
	})
}

func TestObjectURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"file:///tmp/x", "only gs://, s3:// and azblob://"},
		{"gs://bucket", "names a bucket but no object"},
		{"ftp://x/y", "not one of"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := OpenObject(context.Background(), ObjectOptions{URL: tc.url})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestObjectLeaseRenewalNoticesTakeover: the background renewal finds the
// lease overwritten by another syncd, closes Lost, and writes stop.
func TestObjectLeaseRenewalNoticesTakeover(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		// Renewed every second: a renewal a loaded machine runs late must
		// not let the lease expire first (that is another error, tested
		// apart), yet the takeover is noticed within the test's wait.
		a := openT(t, ObjectOptions{URL: url, LeaseTTL: 3 * time.Second}, true)
		// Another syncd writes the lease object behind a's back.
		if err := a.bucket.WriteAll(ctx, a.key+".lease", []byte(`{"id":"intruder"}`), nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("the renewal never noticed that the lease was taken over")
		}
		if err := a.SetError(ctx, "f1", "x"); err == nil || !strings.Contains(err.Error(), "taken over") {
			t.Fatalf("write after the lease was lost: %v", err)
		}
	})
}
