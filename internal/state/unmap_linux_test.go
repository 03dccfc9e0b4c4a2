//go:build linux

package state

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mappedKB is the resident size of the process's maps of path
// (/proc/self/smaps), in KiB.
func mappedKB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	kb, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[5] == path
		case in && len(fields) >= 2 && fields[0] == "Rss:":
			n, _ := strconv.Atoi(fields[1])
			kb += n
		}
	}
	return kb
}

// TestWritesLeaveTheMapReleased: a write transaction leaves none of the
// state file's pages mapped, and what it wrote reads back whole (the
// pages come back from the page cache).
func TestWritesLeaveTheMapReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syncd.db")
	st := openW(t, path, nil)
	ctx := t.Context()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 60000 // about 1.7 MB of index, in 60 chunks
	change := &IndexChange{}
	for i := range n {
		change.Put = append(change.Put, Entry{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Version: Version{Time: start.Add(time.Duration(i) * time.Second), Hash: uint64(i)}})
	}
	if err := st.Commit(ctx, "f1", Commit{Window: Interval{Start: start, End: start.Add(time.Duration(n) * time.Second)}, Rows: n, Index: change}); err != nil {
		t.Fatal(err)
	}
	read := func() {
		t.Helper()
		i := 0
		err := st.Versions(ctx, "f1", start, start.Add(time.Duration(n)*time.Second), func(e Entry) error {
			if want := change.Put[i]; e.ID != want.ID || e.Hash != want.Hash || !e.Time.Equal(want.Time) {
				return fmt.Errorf("entry %d is %+v, want %+v", i, e, want)
			}
			i++
			return nil
		})
		if err != nil || i != n {
			t.Fatalf("read %d entries of %d: %v", i, n, err)
		}
	}
	read()
	if kb := mappedKB(t, path); kb < 1024 {
		t.Fatalf("reading the index mapped %d KB of the state file; the test reads too little to tell", kb)
	}
	if err := st.SetError(ctx, "f1", "x"); err != nil {
		t.Fatal(err)
	}
	if kb := mappedKB(t, path); kb > 64 {
		t.Errorf("after a write %d KB of the state file stay mapped", kb)
	}
	read()
}

// BenchmarkBackfillCommits is the state's share of a backfill: batches of
// 50,000 new records, two in flight, each an intent that keeps its index
// change and a commit that applies it.
func BenchmarkBackfillCommits(b *testing.B) {
	const batches, per = 8, 50000
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	changes := make([]*IndexChange, batches)
	for i := range changes {
		c := &IndexChange{}
		for j := range per {
			k := i*per + j
			c.Put = append(c.Put, Entry{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", k*2654435761%(1<<32), k), Version: Version{Time: start.Add(time.Duration(k) * time.Second), Hash: uint64(k)}})
		}
		changes[i] = c
	}
	for range b.N {
		st, err := OpenBolt(b.Context(), BoltOptions{Path: filepath.Join(b.TempDir(), "syncd.db")})
		if err != nil {
			b.Fatal(err)
		}
		for i, c := range changes {
			id := strconv.Itoa(i)
			if err := st.RecordIntent(b.Context(), "f1", Intent{BatchID: id, Table: "t", Start: start, End: start, Index: c}); err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				if err := st.Commit(b.Context(), "f1", Commit{BatchID: strconv.Itoa(i - 1), Index: changes[i-1], Rows: per}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
