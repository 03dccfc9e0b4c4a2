package parquetsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
)

// memStore is a Storage in memory whose Put obeys its conditions, with a
// hook that runs before each Put (another writer acting in between).
type memStore struct {
	files     map[string]FileStat
	seq       int
	beforePut func(key string)
	puts      []string // "key attempt condition", in order
}

func newMemStore() *memStore { return &memStore{files: map[string]FileStat{}} }

func (m *memStore) set(key, id, attempt string) {
	m.seq++
	m.files[key] = FileStat{Present: true, BatchID: id, Attempt: attempt, Version: fmt.Sprint(m.seq)}
}

func (m *memStore) Stat(_ context.Context, key string) (FileStat, error) { return m.files[key], nil }

func (m *memStore) Put(_ context.Context, key string, o PutOptions, write func(io.Writer) (int64, error)) (int64, error) {
	if m.beforePut != nil {
		m.beforePut(key)
	}
	cond := "none"
	switch {
	case o.IfAbsent:
		cond = "absent"
	case o.IfVersion != "":
		cond = "v" + o.IfVersion
	}
	m.puts = append(m.puts, key+" "+o.Attempt+" "+cond)
	cur := m.files[key]
	if o.IfAbsent && cur.Present || o.IfVersion != "" && cur.Version != o.IfVersion {
		return 0, ErrChanged
	}
	n, err := write(io.Discard)
	if err != nil {
		return 0, err
	}
	m.set(key, o.BatchID, o.Attempt)
	return n, nil
}

func (m *memStore) Keep(context.Context, string) error { return nil }
func (m *memStore) Delete(_ context.Context, key string) error {
	delete(m.files, key)
	return nil
}
func (m *memStore) Entries(context.Context, string, int) ([]string, error) { return nil, nil }
func (m *memStore) Purge(context.Context, string) error                    { return nil }
func (m *memStore) String() string                                         { return "memory" }
func (m *memStore) Close() error                                           { return nil }
func (m *memStore) List(context.Context, string, func(string) error) error { return nil }
func (m *memStore) Open(context.Context, string) (ReadFile, error) {
	return nil, errors.New("memStore: no reads")
}

// TestPutIsConditionalOnWhatWasSeen: every put names what its commit saw
// (absent, or the version in place), so a file that changes in between (a
// dead writer's commit completed late, another writer) is never
// overwritten blindly: the commit looks again, keeps the file if it is now
// the attempt's own, and gives up after maxPutTries.
func TestPutIsConditionalOnWhatWasSeen(t *testing.T) {
	day := time.Date(2024, 1, 5, 0, 0, 0, 0, time.UTC)
	const key = "t/submission_date=2024-01-05/b.parquet"
	cases := []struct {
		name      string
		replace   bool
		before    func(m *memStore) // what is in place at the start
		meanwhile func(m *memStore) // before each put
		wantErr   bool
		wantPuts  []string
		want      string // attempt of the file at the end
	}{
		{"absent: create-only", false, nil, nil, false, []string{key + " a2 absent"}, "a2"},
		{"a stopped attempt's file: replaced on its version", false, func(m *memStore) { m.set(key, "b", "a1") }, nil, false, []string{key + " a2 v1"}, "a2"},
		{"a redo replaces its own attempt's file too", true, func(m *memStore) { m.set(key, "b", "a2") }, nil, false, []string{key + " a2 v1"}, "a2"},
		{"a dead writer's commit lands in between: replaced on its new version", true, func(m *memStore) { m.set(key, "b", "a0") },
			func(m *memStore) {
				if len(m.puts) == 0 {
					m.set(key, "b", "a1")
				}
			}, false, []string{key + " a2 v1", key + " a2 v2"}, "a2"},
		{"the attempt's own file appears in between: kept", false, nil,
			func(m *memStore) {
				if len(m.puts) == 0 {
					m.set(key, "b", "a2")
				}
			}, false, []string{key + " a2 absent"}, "a2"},
		{"the file keeps changing: gives up", false, nil,
			func(m *memStore) { m.set(key, "b", fmt.Sprint("other", len(m.puts))) }, true,
			[]string{key + " a2 absent", key + " a2 v1", key + " a2 v2"}, "other2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemStore()
			if tc.before != nil {
				tc.before(m)
			}
			if tc.meanwhile != nil {
				m.beforePut = func(string) { tc.meanwhile(m) }
			}
			s, err := NewOn(m, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			rec := timedRecord(day.Add(time.Hour))
			defer rec.Release()
			b := sink.Batch{ID: "b", Stream: "f", Table: "t", WindowStart: day, WindowEnd: day.Add(2 * time.Hour), TimeColumn: "submission_time", Attempt: "a2", Replace: tc.replace}
			err = sink.CommitRecord(context.Background(), s, b, rec)
			if gotErr := err != nil; gotErr != tc.wantErr || tc.wantErr && !errors.Is(err, ErrChanged) {
				t.Fatalf("commit error %v, want error: %v", err, tc.wantErr)
			}
			if got := strings.Join(m.puts, "; "); got != strings.Join(tc.wantPuts, "; ") {
				t.Errorf("puts\n got %s\nwant %s", got, strings.Join(tc.wantPuts, "; "))
			}
			if got := m.files[key].Attempt; got != tc.want {
				t.Errorf("the file is attempt %q's, want %q's", got, tc.want)
			}
		})
	}
}
