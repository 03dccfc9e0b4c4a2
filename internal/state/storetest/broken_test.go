package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/state/storetest"
)

// The suite's own tests: each runs the suite over a bolt store broken on
// purpose, in a child process (a failing suite fails its *testing.T), and
// checks that the cases meant to catch the breakage fail while they pass
// over the unbroken store.

const brokenEnv = "STORETEST_BROKEN"

// breakages are the broken stores, by name, and the cases that must fail.
var breakages = map[string][]string{
	"none":           nil,                   // the control
	"double-count":   {"Methods", "Replay"}, // a commit counted under a second batch id too
	"lossy-index":    {"Index", "ReadOnly"}, // Versions drops the last record
	"no-lock":        {"SecondWriter"},      // a second writer gets a store
	"blind-damage":   {"Damage"},            // the damage never happens... and the store cannot tell
	"sticky-secrets": {"Secrets"},           // a nil value deletes nothing
	"lenient":        {"Refusals"},          // an intent without batch id is accepted
	"lost-intent":    {"Methods", "Index"},  // RecordIntent writes nothing
}

// TestBrokenStore runs the suite over the breakage named in brokenEnv; it
// is the child of TestSuiteCatchesBrokenStores and does nothing unless
// that names one.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return
	}
	if _, ok := breakages[name]; !ok {
		t.Fatalf("no breakage %q", name)
	}
	storetest.Run(t, func(t *testing.T) storetest.Place {
		return brokenPlace{boltPlace: boltPlace{path: filepath.Join(t.TempDir(), "syncd.db")}, kind: name}
	})
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	run := func(name string) map[string]bool {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), brokenEnv+"="+name)
		out, _ := cmd.CombinedOutput()
		failed := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: TestBrokenStore/"); ok {
				failed[strings.Fields(f)[0]] = true
			}
		}
		if !strings.Contains(string(out), "TestBrokenStore/Methods") {
			t.Fatalf("breakage %s: the suite did not run:\n%s", name, out)
		}
		return failed
	}
	control := run("none")
	t.Logf("cases failing over the unbroken bolt store: %v", control)
	for name, want := range breakages {
		if name == "none" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			failed := run(name)
			for _, c := range want {
				if control[c] {
					t.Errorf("case %s fails over the unbroken store too: the breakage proves nothing", c)
				}
				if !failed[c] {
					t.Errorf("breakage %s: case %s passed, want it to fail", name, c)
				}
			}
		})
	}
}

type brokenPlace struct {
	boltPlace
	kind string
}

func (p brokenPlace) Open(ctx context.Context, o storetest.Options) (state.Store, error) {
	s, err := p.boltPlace.Open(ctx, o)
	var le *state.LockedError
	if p.kind == "no-lock" && errors.As(err, &le) {
		// A second writer on a copy of its own: split brain.
		return boltPlace{path: p.path + ".split"}.Open(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	return &brokenStore{Store: s, kind: p.kind}, nil
}

func (p brokenPlace) Damage(t *testing.T, formID string) {
	if p.kind != "blind-damage" {
		p.boltPlace.Damage(t, formID)
	}
}

type brokenStore struct {
	state.Store
	kind string
}

func (b *brokenStore) Commit(ctx context.Context, id string, c state.Commit) error {
	if b.kind == "double-count" && c.BatchID != "" {
		// A replay is taken for a new batch: its intent recorded again.
		if err := b.Store.RecordIntent(ctx, id, state.Intent{BatchID: c.BatchID, Start: c.Window.Start, End: c.Window.End}); err != nil {
			return err
		}
	}
	return b.Store.Commit(ctx, id, c)
}

func (b *brokenStore) Versions(ctx context.Context, id string, from, to time.Time, fn func(state.Entry) error) error {
	if b.kind != "lossy-index" {
		return b.Store.Versions(ctx, id, from, to, fn)
	}
	var es []state.Entry
	if err := b.Store.Versions(ctx, id, from, to, func(e state.Entry) error { es = append(es, e); return nil }); err != nil {
		return err
	}
	if len(es) > 0 {
		es = es[:len(es)-1]
	}
	for _, e := range slices.Clip(es) {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (b *brokenStore) PutSecret(ctx context.Context, name string, v []byte) error {
	if b.kind == "sticky-secrets" && v == nil {
		return nil
	}
	return b.Store.PutSecret(ctx, name, v)
}

func (b *brokenStore) RecordIntent(ctx context.Context, id string, in state.Intent) error {
	switch {
	case b.kind == "lenient" && in.BatchID == "":
		return nil
	case b.kind == "lost-intent":
		return nil
	}
	return b.Store.RecordIntent(ctx, id, in)
}
