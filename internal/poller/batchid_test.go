package poller

import (
	"testing"
	"time"
)

func TestParseBatchID(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 30, 0, 125e6, time.UTC)
	end := start.Add(36 * time.Hour)
	base := BatchID("form1", start, end)
	cases := []struct {
		name, stream, id string
		ok               bool
		gen              int
		rec              int64
	}{
		{"plain", "form1", base, true, 0, 0},
		{"generation", "form1", base + "-g3", true, 3, 0},
		{"reconcile", "form1", base + "-r1700000000000", true, 0, 1700000000000},
		{"both", "form1", base + "-g2-r1700000000000", true, 2, 1700000000000},
		{"another stream", "form2", base, false, 0, 0},
		{"a stream whose id extends this one", "form", base, false, 0, 0},
		{"folded id", "scheduling/bookings", BatchID("scheduling/bookings", start, end) + "-g1", true, 1, 0},
		{"garbage suffix", "form1", base + "-x", false, 0, 0},
		{"bad generation", "form1", base + "-g0", false, 0, 0},
		{"not a batch id", "form1", "part-0001.parquet", false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := ParseBatchID(tc.stream, tc.id)
			if ok != tc.ok {
				t.Fatalf("ParseBatchID(%q, %q) ok = %v, want %v", tc.stream, tc.id, ok, tc.ok)
			}
			if !ok {
				return
			}
			if !n.Start.Equal(start) || !n.End.Equal(end) || n.Generation != tc.gen || n.Reconcile != tc.rec {
				t.Errorf("got %+v; want window [%s, %s), generation %d, reconcile %d", n, start, end, tc.gen, tc.rec)
			}
		})
	}
}
