package parquetsink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
)

// TestInventoryOfOlderFilesAndTemporaries: files written before
// syncd.parts existed count as a whole batch only when the batch is one
// file whose window lies in its partition; temporary files and hidden
// folders are never listed.
func TestInventoryOfOlderFilesAndTemporaries(t *testing.T) {
	d := func(day, h int) time.Time { return time.Date(2024, 1, day, h, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// writeOld writes a file of batch id in partition part as versions
	// before syncd.parts did: no parts, no attempt in the footer.
	writeOld := func(id, part string, from, to time.Time, times ...time.Time) {
		t.Helper()
		rec := timedRecord(times...)
		defer rec.Release()
		dir := filepath.Join(root, "t", "submission_date="+part)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, id+".parquet"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := sink.Batch{ID: id, FormID: "f", Table: "t", WindowStart: from, WindowEnd: to}
		if _, err := Encode(f, rec, b, nil, EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writeOld("old-one", "2024-01-05", d(5, 1), d(5, 3), d(5, 1), d(5, 2))
	// A window across two days, of which one file is there: nothing says
	// whether the other day had rows.
	writeOld("old-span", "2024-01-06", d(6, 20), d(7, 4), d(6, 21))
	// Leftovers no reader sees.
	for _, p := range []string{"t/submission_date=2024-01-05/.tmp1" + tmpMarker + "123", "t/.hidden/x.parquet", "t/_SUCCESS"} {
		p = filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ids, err := s.HeldBatches(ctx, "t")
	if err != nil || !slices.Equal(ids, []string{"old-one", "old-span"}) {
		t.Fatalf("HeldBatches = %v, %v; want [old-one old-span]", ids, err)
	}
	held, err := s.DescribeBatches(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		complete bool
		allParts []string
		rows     int64
	}{
		{true, []string{"2024-01-05"}, 2},
		{false, nil, 1},
	}
	for i, c := range cases {
		h := held[i]
		if h.Complete != c.complete || !slices.Equal(h.AllParts, c.allParts) || h.Rows != c.rows || h.Attempt != "" {
			t.Errorf("%s: complete %v, all parts %v, %d rows, attempt %q; want %v, %v, %d, \"\"", h.ID, h.Complete, h.AllParts, h.Rows, h.Attempt, c.complete, c.allParts, c.rows)
		}
	}
	var keys []string
	err = s.ReadVersions(ctx, sink.TableColumns{Table: "t", Key: "submission_id", Time: "submission_time"}, func(v sink.RowVersion) error {
		keys = append(keys, v.BatchID+"/"+v.Key)
		return nil
	})
	if err != nil || !slices.Equal(keys, []string{"old-one/s0", "old-one/s1"}) {
		t.Fatalf("ReadVersions = %v, %v; want the rows of old-one only", keys, err)
	}
}
