// Package storetest is the contract every state.Store keeps, as one suite
// that each backend's tests run (Litestream's RunWithReplicaClient is the
// model): every method of the Store does what package state says, a
// replayed Commit changes nothing and no counter counts a batch twice, the
// version index moves with Commit and Intent, a second writer is refused
// (and, for a store with a lease, a writer that lost it can write nothing),
// a damaged record is reported as damage of its stream only, and the
// fixtures written before format 3 open and migrate.
//
// A backend gives the suite places (Place): where one state lives, opened
// as many times as a case needs, with the hooks only the backend can
// provide (damage at rest, a fixture written in place).
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit/clock"
)

// Options are how the suite opens a store on a place.
type Options struct {
	// ReadOnly opens for inspection: writes fail with state.ErrReadOnly.
	ReadOnly bool
	// Now is the store's clock (timestamps, and a lease's expiry); the
	// suite always sets it, so nothing waits on the wall clock.
	Now func() time.Time
	// LeaseTTL is the lease of a store that holds one; zero: its default.
	LeaseTTL time.Duration
}

// Place is where one store's state lives: a state file, a state object.
type Place interface {
	// Open opens a store on the place. A second writer while one is open
	// must fail (the suite checks how).
	Open(ctx context.Context, o Options) (state.Store, error)
	// Damage flips the low bit of the first digit of "rows": in the
	// record of formID as it lies at rest (no store is open): a single
	// bit flipped in one stream's record, as a bad sector would.
	Damage(t *testing.T, formID string)
	// Seed writes the fixture of the format before 3 at the place
	// (nothing is open): FixtureBolt for a state file, FixtureObject for
	// a state object (see Fixture).
	Seed(t *testing.T)
}

// Run runs the contract over the places newPlace makes: each case gets a
// fresh, empty one.
func Run(t *testing.T, newPlace func(t *testing.T) Place) {
	t.Run("Methods", func(t *testing.T) { testMethods(t, newPlace(t)) })
	t.Run("Index", func(t *testing.T) { testIndex(t, newPlace(t)) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, newPlace(t)) })
	t.Run("Layout", func(t *testing.T) { testLayout(t, newPlace(t)) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, newPlace(t)) })
	t.Run("Secrets", func(t *testing.T) { testSecrets(t, newPlace(t)) })
	t.Run("ReadOnly", func(t *testing.T) { testReadOnly(t, newPlace(t)) })
	t.Run("SecondWriter", func(t *testing.T) { testSecondWriter(t, newPlace(t)) })
	t.Run("Lease", func(t *testing.T) { testLease(t, newPlace) })
	t.Run("Damage", func(t *testing.T) { testDamage(t, newPlace(t)) })
	t.Run("Migration", func(t *testing.T) { testMigration(t, newPlace(t)) })
}

// T0 is the first instant of the suite's windows.
var T0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// H is hour h after T0.
func H(h int) time.Time { return T0.Add(time.Duration(h) * time.Hour) }

// Win is the window of hours [a, b).
func Win(a, b int) state.Interval { return state.Interval{Start: H(a), End: H(b)} }

// Clock is a clock the suite moves by hand; a lease's renewal reads it
// from its own goroutine.
type Clock = clock.Clock

// NewClock starts at t.
func NewClock(t time.Time) *Clock { return clock.New(t) }

// longLease is the lease of every case but Lease: the suite's clocks
// jump by minutes and hours, which must not expire it.
const longLease = 100000 * time.Hour

func open(t *testing.T, p Place, o Options) state.Store {
	t.Helper()
	if o.LeaseTTL == 0 {
		o.LeaseTTL = longLease
	}
	s, err := p.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s state.Store, id string) state.StreamState {
	t.Helper()
	st, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return st
}

// index reads the whole version index of form: id -> version.
func index(t *testing.T, s state.Store, form string, from, to time.Time) []state.Entry {
	t.Helper()
	var out []state.Entry
	if err := s.Versions(context.Background(), form, from, to, func(e state.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("Versions(%s): %v", form, err)
	}
	return out
}

// all is every instant the suite uses.
var all = [2]time.Time{time.Unix(0, 0).UTC(), H(100000)}

func indexMap(t *testing.T, s state.Store, form string) map[string]state.Version {
	t.Helper()
	m := map[string]state.Version{}
	for _, e := range index(t, s, form, all[0], all[1]) {
		if _, dup := m[e.ID]; dup {
			t.Fatalf("the index of %s holds %s twice", form, e.ID)
		}
		m[e.ID] = e.Version
	}
	return m
}

// E is an index entry of record id at hour h, version v.
func E(id string, h, v int) state.Entry {
	return state.Entry{ID: id, Version: state.Version{Time: H(h), Hash: state.TimeVersion(H(h).Add(time.Duration(v) * time.Second))}}
}

func isCorrupt(err error, form string) bool {
	var ce *state.CorruptError
	return errors.As(err, &ce) && ce.Form == form
}
