package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testClock is a Now the test moves by hand.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func openW(t *testing.T, path string, clk *testClock) *Bolt {
	t.Helper()
	opts := BoltOptions{Path: path}
	if clk != nil {
		opts.Now = clk.now
	}
	st, err := OpenBolt(t.Context(), opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openR(t *testing.T, path string) *Bolt {
	t.Helper()
	st, err := OpenBolt(t.Context(), BoltOptions{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s read-only: %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "missing", "dir", "syncd.db") // parent created
	clk := &testClock{}
	st := openW(t, path, clk)

	zone := time.FixedZone("CET", 3600)
	ns := 789 * time.Nanosecond // below µs: dropped on the way in
	// "<" and "&" must survive as written, not as \u003c.
	schemaA := json.RawMessage(`{"columns":[{"id":"q1","name":"a<b & c"}]}`)
	schemaB := json.RawMessage(`{"columns":[]}`)

	clk.t = m(100).In(zone).Add(ns)
	must(t, st.RecordIntent(ctx, "form-a", Intent{BatchID: "b1", Table: "form_a", Start: m(0).In(zone).Add(ns), End: m(10).Add(ns), Rows: 42, CreatedAt: m(99).In(zone).Add(ns)}))
	must(t, st.RecordIntent(ctx, "form-a", Intent{BatchID: "b2", Table: "form_a", Start: m(10), End: m(20)}))
	must(t, st.RecordIntent(ctx, "form-a", Intent{BatchID: "b3", Table: "form_a", Start: m(20), End: m(30), Rows: 5, CreatedAt: m(98)}))
	clk.t = m(101)
	must(t, st.Commit(ctx, "form-a", Commit{BatchID: "b1", Window: Interval{Start: m(0).Add(ns), End: m(10).In(zone)}, Rows: 42, Schema: schemaA}))
	clk.t = m(102)
	must(t, st.Commit(ctx, "form-a", Commit{Window: iv(40, 50)}))
	must(t, st.SetSucceeded(ctx, "form-a", m(102)))
	clk.t = m(103)
	must(t, st.SetError(ctx, "form-a", "list submissions: 503"))
	clk.t = m(104)
	must(t, st.SetSchema(ctx, "form-b", schemaB))
	must(t, st.Close())

	want := []StreamState{
		{
			Key:       "form-a",
			Committed: set(0, 10, 40, 50),
			Intents: map[string]Intent{
				"b2": {BatchID: "b2", Table: "form_a", Start: m(10), End: m(20), CreatedAt: m(100)},
				"b3": {BatchID: "b3", Table: "form_a", Start: m(20), End: m(30), Rows: 5, CreatedAt: m(98)},
			},
			Schema:      schemaA,
			Rows:        42,
			Batches:     1,
			LastSuccess: m(102),
			LastError:   "list submissions: 503",
			UpdatedAt:   m(103),
		},
		{Key: "form-b", Schema: schemaB, UpdatedAt: m(104)},
	}

	st = openW(t, path, nil)
	for _, w := range want {
		got, err := st.Get(ctx, w.Key)
		must(t, err)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("after reopen, Get(%s) =\n%+v\nwant\n%+v", w.Key, got, w)
		}
	}
	if got, err := st.Get(ctx, "never-synced"); err != nil || !reflect.DeepEqual(got, StreamState{Key: "never-synced"}) {
		t.Errorf("Get of an unknown form = %+v, %v; want the zero state with its id", got, err)
	}
	must(t, st.Close())

	ro := openR(t, path)
	list, err := ro.List(ctx)
	must(t, err)
	if !reflect.DeepEqual(list, want) {
		t.Errorf("read-only List =\n%+v\nwant\n%+v", list, want)
	}
}

func TestCommit(t *testing.T) {
	ctx := t.Context()
	clk := &testClock{t: m(1000)}
	st := openW(t, filepath.Join(t.TempDir(), "syncd.db"), clk)
	must(t, st.RecordIntent(ctx, "f", Intent{BatchID: "b1", Start: m(0), End: m(10)}))
	must(t, st.RecordIntent(ctx, "f", Intent{BatchID: "b2", Start: m(10), End: m(20)}))
	must(t, st.SetError(ctx, "f", "boom"))

	// view is what a step is judged on.
	type view struct {
		Committed   Intervals
		Intents     []string
		Rows        int64
		Batches     int64
		Schema      string
		LastError   string
		LastSuccess time.Time
	}
	steps := []struct {
		name    string
		op      func(*Bolt) error
		wantErr bool
		want    view
	}{
		{
			name: "clears the intent, covers the window, pins the schema, counts; the error stays (no pass ended yet)",
			op: func(st *Bolt) error {
				return st.Commit(ctx, "f", Commit{BatchID: "b1", Window: iv(0, 10), Rows: 7, Schema: json.RawMessage(`{"v":1}`)})
			},
			want: view{set(0, 10), []string{"b2"}, 7, 1, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "a replay changes nothing",
			op: func(st *Bolt) error {
				return st.Commit(ctx, "f", Commit{BatchID: "b1", Window: iv(0, 10), Rows: 7, Schema: json.RawMessage(`{"v":9}`)})
			},
			want: view{set(0, 10), []string{"b2"}, 7, 1, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "a nil schema keeps the pin",
			op:   func(st *Bolt) error { return st.Commit(ctx, "f", Commit{BatchID: "b2", Window: iv(10, 20), Rows: 3}) },
			want: view{set(0, 20), nil, 10, 2, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "an empty range is covered but is no batch",
			op:   func(st *Bolt) error { return st.Commit(ctx, "f", Commit{Window: iv(30, 40)}) },
			want: view{set(0, 20, 30, 40), nil, 10, 2, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "invalid schema JSON is refused and nothing changes",
			op: func(st *Bolt) error {
				must(t, st.RecordIntent(ctx, "f", Intent{BatchID: "b3", Start: m(20), End: m(30)}))
				return st.Commit(ctx, "f", Commit{BatchID: "b3", Window: iv(20, 30), Rows: 1, Schema: json.RawMessage(`{"v":`)})
			},
			wantErr: true,
			want:    view{set(0, 20, 30, 40), []string{"b3"}, 10, 2, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name:    "a reversed window is refused",
			op:      func(st *Bolt) error { return st.Commit(ctx, "f", Commit{BatchID: "b3", Window: iv(30, 20), Rows: 1}) },
			wantErr: true,
			want:    view{set(0, 20, 30, 40), []string{"b3"}, 10, 2, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "filling the hole merges the windows",
			op:   func(st *Bolt) error { return st.Commit(ctx, "f", Commit{BatchID: "b3", Window: iv(20, 30), Rows: 1}) },
			want: view{set(0, 40), nil, 11, 3, `{"v":1}`, "boom", time.Time{}},
		},
		{
			name: "a batch without an intent over an uncovered window still counts",
			op: func(st *Bolt) error {
				return st.Commit(ctx, "f", Commit{BatchID: "b9", Window: iv(50, 60), Rows: 5, Schema: json.RawMessage(`{"v":2}`)})
			},
			want: view{set(0, 40, 50, 60), nil, 16, 4, `{"v":2}`, "boom", time.Time{}},
		},
	}
	steps = append(steps, struct {
		name    string
		op      func(*Bolt) error
		wantErr bool
		want    view
	}{
		name: "a pass that ended well records its success and clears the error",
		op:   func(st *Bolt) error { return st.SetSucceeded(ctx, "f", m(1008)) },
		want: view{set(0, 40, 50, 60), nil, 16, 4, `{"v":2}`, "", m(1008)},
	})
	for k, s := range steps {
		clk.t = m(1000 + k)
		err := s.op(st)
		if (err != nil) != s.wantErr {
			t.Fatalf("step %q: err = %v, want error %v", s.name, err, s.wantErr)
		}
		fs, gerr := st.Get(ctx, "f")
		must(t, gerr)
		got := view{fs.Committed, slices.Sorted(maps.Keys(fs.Intents)), fs.Rows, fs.Batches, string(fs.Schema), fs.LastError, fs.LastSuccess}
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %q:\n got %+v\nwant %+v", s.name, got, s.want)
		}
	}
}

// TestCommitConcurrent checks that concurrent transitions of one form are
// each applied whole: a lost read-modify-write would lose counts or windows.
func TestCommitConcurrent(t *testing.T) {
	ctx := t.Context()
	st := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
	const workers, each = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for k := range each {
				n := w*each + k
				id := fmt.Sprintf("b%d", n)
				if err := st.RecordIntent(ctx, "f", Intent{BatchID: id, Start: m(n), End: m(n + 1)}); err != nil {
					errs <- err
					return
				}
				if err := st.Commit(ctx, "f", Commit{BatchID: id, Window: iv(n, n+1), Rows: 2}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fs, err := st.Get(ctx, "f")
	must(t, err)
	if !reflect.DeepEqual(fs.Committed, set(0, workers*each)) || fs.Batches != workers*each || fs.Rows != 2*workers*each || len(fs.Intents) != 0 {
		t.Errorf("after %d concurrent batches: committed %v, %d batches, %d rows, %d intents", workers*each, fs.Committed, fs.Batches, fs.Rows, len(fs.Intents))
	}
}

func TestIntentValidation(t *testing.T) {
	ctx := t.Context()
	st := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
	tests := []struct {
		name string
		in   Intent
	}{
		{"no batch id", Intent{Start: m(0), End: m(1)}},
		{"reversed window", Intent{BatchID: "b", Start: m(1), End: m(0)}},
		{"negative rows", Intent{BatchID: "b", Start: m(0), End: m(1), Rows: -1}},
	}
	for _, tt := range tests {
		if err := st.RecordIntent(ctx, "f", tt.in); err == nil {
			t.Errorf("%s: RecordIntent accepted %+v", tt.name, tt.in)
		}
	}
	if err := st.RecordIntent(ctx, "", Intent{BatchID: "b", Start: m(0), End: m(1)}); err == nil {
		t.Error("RecordIntent accepted an empty form id")
	}
	if list, err := st.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("refused intents left state behind: %+v, %v", list, err)
	}
}

func TestDropIntentAndReset(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "syncd.db")
	st := openW(t, path, nil)
	must(t, st.RecordIntent(ctx, "a", Intent{BatchID: "b1", Start: m(0), End: m(1)}))
	must(t, st.RecordIntent(ctx, "a", Intent{BatchID: "b2", Start: m(1), End: m(2)}))
	must(t, st.Commit(ctx, "a", Commit{Window: iv(5, 6), Schema: json.RawMessage(`{}`)}))
	must(t, st.Commit(ctx, "b", Commit{Window: iv(0, 9), Rows: 3}))

	must(t, st.DropIntent(ctx, "a", "b1"))
	must(t, st.DropIntent(ctx, "a", "b1"))      // already gone
	must(t, st.DropIntent(ctx, "nobody", "b1")) // creates no record
	fs, err := st.Get(ctx, "a")
	must(t, err)
	if _, open := fs.Intents["b1"]; open || len(fs.Intents) != 1 || !reflect.DeepEqual(fs.Committed, set(5, 6)) {
		t.Errorf("after DropIntent: intents %v, committed %v", fs.Intents, fs.Committed)
	}

	must(t, st.Reset(ctx, "a"))
	must(t, st.Close())

	st = openW(t, path, nil)
	fs, err = st.Get(ctx, "a")
	must(t, err)
	fs.UpdatedAt = time.Time{}
	if !reflect.DeepEqual(fs, StreamState{Key: "a", Generation: 1}) {
		t.Errorf("after Reset and reopen, Get(a) = %+v, %v; want nothing but generation 1", fs, err)
	}
	list, err := st.List(ctx)
	must(t, err)
	if len(list) != 2 || list[1].Key != "b" || !reflect.DeepEqual(list[1].Committed, set(0, 9)) || list[1].Rows != 3 {
		t.Errorf("Reset of a touched other forms: %+v", list)
	}
}

func TestUncommitAndRefresh(t *testing.T) {
	ctx := t.Context()
	st := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
	must(t, st.Commit(ctx, "f", Commit{Window: iv(0, 3)}))
	must(t, st.Commit(ctx, "f", Commit{Window: iv(5, 9), Rows: 2}))

	must(t, st.Uncommit(ctx, "f", m(6)))
	fs, err := st.Get(ctx, "f")
	must(t, err)
	if !reflect.DeepEqual(fs.Committed, Intervals{iv(0, 3), iv(5, 6)}) {
		t.Errorf("after Uncommit(6): %v", fs.Committed)
	}
	must(t, st.Uncommit(ctx, "f", m(4)))
	if fs, _ = st.Get(ctx, "f"); !reflect.DeepEqual(fs.Committed, set(0, 3)) {
		t.Errorf("after Uncommit(4): %v", fs.Committed)
	}

	must(t, st.RecordIntent(ctx, "f", Intent{BatchID: "b", Start: m(3), End: m(4)}))
	if err := st.Uncommit(ctx, "f", m(1)); err == nil || !strings.Contains(err.Error(), "open batches") {
		t.Errorf("Uncommit with an open batch: %v", err)
	}
	if err := st.BeginRefresh(ctx, "f", Refresh{Table: "t"}); err == nil {
		t.Error("BeginRefresh with an open batch succeeded")
	}
	must(t, st.DropIntent(ctx, "f", "b"))
	must(t, st.BeginRefresh(ctx, "f", Refresh{Table: "t"}))
	if fs, _ = st.Get(ctx, "f"); fs.Refresh == nil || fs.Refresh.Table != "t" || fs.Refresh.RequestedAt.IsZero() || len(fs.Committed) == 0 {
		t.Errorf("after BeginRefresh: %+v", fs)
	}
	must(t, st.FinishRefresh(ctx, "f"))
	if fs, _ = st.Get(ctx, "f"); fs.Refresh != nil || len(fs.Committed) != 0 || fs.Generation != 1 {
		t.Errorf("after FinishRefresh: %+v", fs)
	}
}

func TestCancelledContext(t *testing.T) {
	st := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ops := map[string]func() error{
		"Get":          func() error { _, err := st.Get(ctx, "f"); return err },
		"List":         func() error { _, err := st.List(ctx); return err },
		"RecordIntent": func() error { return st.RecordIntent(ctx, "f", Intent{BatchID: "b", Start: m(0), End: m(1)}) },
		"Commit":       func() error { return st.Commit(ctx, "f", Commit{Window: iv(0, 1)}) },
		"Reset":        func() error { return st.Reset(ctx, "f") },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	if list, err := st.List(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("cancelled writes left state behind: %+v, %v", list, err)
	}
	if _, err := OpenBolt(ctx, BoltOptions{Path: filepath.Join(t.TempDir(), "x.db")}); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenBolt with a cancelled context: %v", err)
	}
}

func TestReadOnly(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	t.Run("missing file reads as empty and is not created", func(t *testing.T) {
		path := filepath.Join(dir, "absent", "syncd.db")
		ro := openR(t, path)
		if fs, err := ro.Get(ctx, "f"); err != nil || !reflect.DeepEqual(fs, StreamState{Key: "f"}) {
			t.Errorf("Get = %+v, %v", fs, err)
		}
		if list, err := ro.List(ctx); err != nil || len(list) != 0 {
			t.Errorf("List = %+v, %v", list, err)
		}
		if err := ro.SetError(ctx, "f", "x"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("SetError on a read-only store: %v, want ErrReadOnly", err)
		}
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a read-only open created %s: %v", filepath.Dir(path), err)
		}
	})

	t.Run("readers share, writes refused, a writer waits for none of them forever", func(t *testing.T) {
		path := filepath.Join(dir, "syncd.db")
		w := openW(t, path, nil)
		must(t, w.Commit(ctx, "f", Commit{Window: iv(0, 1)}))
		must(t, w.Close())

		r1, r2 := openR(t, path), openR(t, path)
		for _, r := range []*Bolt{r1, r2} {
			if fs, err := r.Get(ctx, "f"); err != nil || !reflect.DeepEqual(fs.Committed, set(0, 1)) {
				t.Errorf("reader Get = %+v, %v", fs, err)
			}
		}
		if err := r1.Commit(ctx, "f", Commit{Window: iv(1, 2)}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Commit on a read-only store: %v, want ErrReadOnly", err)
		}

		// Readers hold bbolt's shared lock without the lock file: a writer
		// gives up after LockTimeout and says a reader is in the way.
		began := time.Now()
		_, err := OpenBolt(ctx, BoltOptions{Path: path, LockTimeout: 200 * time.Millisecond})
		var le *LockedError
		if !errors.As(err, &le) || !le.Foreign || !strings.Contains(err.Error(), path) {
			t.Fatalf("writer while readers are open: %v, want a LockedError about another process", err)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("writer took %v to give up, LockTimeout is 200ms", d)
		}
		must(t, r1.Close())
		must(t, r2.Close())
		openW(t, path, nil) // and once they are gone, it opens
	})
}

func TestSameProcessSecondWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syncd.db")
	first := openW(t, path, nil)
	_, err := OpenBolt(t.Context(), BoltOptions{Path: path, LockTimeout: 5 * time.Second})
	var le *LockedError
	if !errors.As(err, &le) || le.Holder == nil || le.Holder.PID != os.Getpid() {
		t.Fatalf("second writer in the same process: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	must(t, first.Close())
	must(t, first.Close()) // twice is fine
	if b, err := os.ReadFile(path + ".lock"); err != nil || len(b) != 0 {
		t.Errorf("lock file after Close holds %q, %v; want it empty", b, err)
	}
	openW(t, path, nil)
}

// writeTemplate builds a real state file spanning several pages and returns
// its bytes, its page size and the size its pages need.
func writeTemplate(t *testing.T) (data []byte, pageSize int, need int64) {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "template.db")
	st := openW(t, path, nil)
	schema := json.RawMessage(`{"columns":"` + strings.Repeat("x", 700) + `"}`)
	for k := range 24 {
		id := fmt.Sprintf("form-%02d", k)
		must(t, st.RecordIntent(ctx, id, Intent{BatchID: "b", Start: m(k), End: m(k + 1)}))
		must(t, st.Commit(ctx, id, Commit{BatchID: "b", Window: iv(k, k+1), Rows: k, Schema: schema}))
	}
	must(t, st.Close())
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	pageSize = db.Info().PageSize
	must(t, db.View(func(tx *bolt.Tx) error { need = tx.Size(); return nil }))
	must(t, db.Close())
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if need < int64(6*pageSize) {
		t.Fatalf("template uses %d bytes, want several pages of %d", need, pageSize)
	}
	return data, pageSize, need
}

// rewrite changes a valid state file through bbolt directly, as a bug or a
// foreign tool might.
func rewrite(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	must(t, db.Update(fn))
	must(t, db.Close())
}

func TestDamagedFile(t *testing.T) {
	tpl, pageSize, need := writeTemplate(t)
	corrupt := func(err error) string {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return "not a *CorruptError"
		}
		if !strings.Contains(err.Error(), "restore it from a backup") {
			return "does not say how to recover"
		}
		return ""
	}
	putForm := func(key, val string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(formsBucket).Put([]byte(key), []byte(val)) })
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
		judge  func(err error) string // "" if err is the right one
	}{
		{
			name: "garbage",
			damage: func(t *testing.T, path string) {
				must(t, os.WriteFile(path, []byte(strings.Repeat("not a database\n", 3000)), 0o600))
			},
			judge: corrupt,
		},
		{"empty", func(t *testing.T, path string) { must(t, os.Truncate(path, 0)) }, corrupt},
		{"truncated to 100 bytes", func(t *testing.T, path string) { must(t, os.Truncate(path, 100)) }, corrupt},
		{"truncated to half its pages", func(t *testing.T, path string) {
			must(t, os.Truncate(path, need/2/int64(pageSize)*int64(pageSize)))
		}, corrupt},
		{"last page cut off", func(t *testing.T, path string) { must(t, os.Truncate(path, need-int64(pageSize))) }, corrupt},
		{"meta pages zeroed", func(t *testing.T, path string) { zero(t, path, 0, 2*int64(pageSize)) }, corrupt},
		{"data pages zeroed", func(t *testing.T, path string) { zero(t, path, 2*int64(pageSize), need) }, corrupt},
		{"record the manifest does not list", putForm("form-99", `{"form_id":"form-99"}`), corrupt},
		{"record of the manifest missing", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(formsBucket).Delete([]byte("form-03")) })
		}, corrupt},
		{"record replaced by a valid older one", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error {
				val, _ := sealRecord([]byte("form-03"), []byte(`{"form_id":"form-03"}`))
				return tx.Bucket(formsBucket).Put([]byte("form-03"), val)
			})
		}, corrupt},
		{"manifest damaged", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error {
				raw := slices.Clone(tx.Bucket(metaBucket).Get(manifestKey))
				raw[len(raw)/2] ^= 0x20
				return tx.Bucket(metaBucket).Put(manifestKey, raw)
			})
		}, corrupt},
		{"manifest missing", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Delete(manifestKey) })
		}, corrupt},
		{"format version unreadable", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(versionKey, []byte("one")) })
		}, corrupt},
		{"newer format", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(versionKey, []byte("4")) })
		}, func(err error) string {
			var ne *NewerFormatError
			if !errors.As(err, &ne) || ne.Version != 4 || ne.Supported != formatVersion || !strings.Contains(err.Error(), "newer") {
				return "not a *NewerFormatError for version 4"
			}
			return ""
		}},
		{"not a syncd file", func(t *testing.T, path string) {
			must(t, os.Remove(path))
			rewrite(t, path, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
		}, func(err error) string {
			if err == nil || !strings.Contains(err.Error(), "not a syncd state file") {
				return "does not say it is not a syncd state file"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		for _, readOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/readonly=%v", tt.name, readOnly), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "syncd.db")
				must(t, os.WriteFile(path, tpl, 0o600))
				tt.damage(t, path)
				before, err := os.ReadFile(path)
				must(t, err)

				// Twice: a failed writer open must let go of the lock.
				for attempt := range 2 {
					st, err := OpenBolt(t.Context(), BoltOptions{Path: path, ReadOnly: readOnly})
					if err == nil {
						st.Close()
						t.Fatal("opened a damaged state file")
					}
					if attempt == 0 {
						t.Log(err)
					}
					if why := tt.judge(err); why != "" {
						t.Fatalf("error %q: %s", err, why)
					}
					if !strings.Contains(err.Error(), path) {
						t.Errorf("error %q does not name the file", err)
					}
				}
				after, err := os.ReadFile(path)
				must(t, err)
				if !slices.Equal(before, after) {
					t.Error("opening changed the damaged file")
				}
			})
		}
	}
}

func zero(t *testing.T, path string, from, to int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, to-from), from)
	must(t, err)
}

// TestRandomDamage damages a real state file at random (seeded) and checks
// that nothing crashes: each open either fails with a CorruptError and
// leaves the file as it was, or succeeds (the damage hit free pages or left
// valid bytes), and then reads and writes fail, if at all, with a
// CorruptError too. Among these seeds, 455 makes bbolt's own tx.Check fault
// fatally, and 32 leaves a freelist that would write past the file.
func TestRandomDamage(t *testing.T) {
	tpl, pageSize, need := writeTemplate(t)
	pages := int(need) / pageSize
	dir := t.TempDir()
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		data := slices.Clone(tpl)
		switch seed % 3 {
		case 0: // one page of garbage
			p := 2 + rng.IntN(pages-2)
			for k := p * pageSize; k < (p+1)*pageSize; k++ {
				data[k] = byte(rng.Uint32())
			}
		case 1: // a page header of garbage
			p := 2 + rng.IntN(pages-2)
			for k := p * pageSize; k < p*pageSize+16; k++ {
				data[k] = byte(rng.Uint32())
			}
		case 2: // a few bytes anywhere past the header pages
			for range 1 + rng.IntN(8) {
				data[2*pageSize+rng.IntN(int(need)-2*pageSize)] = byte(rng.Uint32())
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("%d.db", seed))
		must(t, os.WriteFile(path, data, 0o600))
		for _, readOnly := range []bool{true, false} {
			st, err := OpenBolt(t.Context(), BoltOptions{Path: path, ReadOnly: readOnly})
			var ce *CorruptError
			if err != nil {
				if !errors.As(err, &ce) {
					t.Fatalf("seed %d readonly=%v: %v, want a CorruptError", seed, readOnly, err)
				}
				if after, _ := os.ReadFile(path); !slices.Equal(after, data) {
					t.Fatalf("seed %d: a failed open changed the file", seed)
				}
				continue
			}
			_, err = st.List(t.Context())
			if !readOnly {
				err = errors.Join(err, st.Commit(t.Context(), "form-05", Commit{Window: iv(100, 101)}))
			}
			st.Close()
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("seed %d readonly=%v: after open: %v, want a CorruptError", seed, readOnly, err)
			}
			data, _ = os.ReadFile(path) // a write may have changed it
		}
	}
}

func TestSecrets(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "syncd.db")
	st := openW(t, path, nil)
	if v, err := st.GetSecret(ctx, "oauth"); err != nil || v != nil {
		t.Fatalf("GetSecret before any Put = %q, %v", v, err)
	}
	must(t, st.PutSecret(ctx, "oauth", []byte(`{"a":1}`)))
	must(t, st.PutSecret(ctx, "other", []byte("x")))
	must(t, st.Close())
	st = openW(t, path, nil)
	if v, err := st.GetSecret(ctx, "oauth"); err != nil || string(v) != `{"a":1}` {
		t.Fatalf("after reopen GetSecret = %q, %v", v, err)
	}
	must(t, st.PutSecret(ctx, "oauth", nil))
	if v, _ := st.GetSecret(ctx, "oauth"); v != nil {
		t.Errorf("deleted secret reads %q", v)
	}
	if v, _ := st.GetSecret(ctx, "other"); string(v) != "x" {
		t.Errorf("deleting one secret touched another: %q", v)
	}
	if list, _ := st.List(ctx); len(list) != 0 {
		t.Errorf("secrets show up as forms: %+v", list)
	}
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600: it holds tokens", fi.Mode().Perm())
	}
}
