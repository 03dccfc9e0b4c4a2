package chaos

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
)

func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	covered := state.Intervals{{Start: at(0), End: at(60)}}
	// Epoch 1 walked [0, 60) and died; epoch 2 counted it, walked it
	// (seq 10 and 12) and counted again (seq 14).
	pages := []formsim.JournalPage{
		{Seq: 2, Epoch: 1, From: at(0), To: at(60), Limit: 150, IDs: []string{"a", "b", "old"}},
		{Seq: 8, Epoch: 2, From: at(0), To: at(60), Limit: 1, IDs: []string{"a"}},
		{Seq: 10, Epoch: 2, From: at(0), To: at(60), Limit: 150, IDs: []string{"a", "b", "mid", "pairD"}},
		{Seq: 12, Epoch: 2, From: at(0), To: at(60), Limit: 150, Offset: 3, IDs: []string{"gone"}},
		{Seq: 14, Epoch: 2, From: at(0), To: at(60), Limit: 1, IDs: []string{"a"}},
	}
	subs := []formsim.JournalSub{
		{ID: "a", Time: at(1)},
		{ID: "b", Time: at(2), Deleted: 15},                           // exported, deleted after: stays
		{ID: "old", Time: at(3), Deleted: 5},                          // deleted before the final walk
		{ID: "mid", Time: at(4), Created: 9},                          // imported before the walk began
		{ID: "gone", Time: at(5), Deleted: 13},                        // deleted while walked, after being served
		{ID: "late", Time: at(6), Created: 17},                        // imported after the window committed
		{ID: "during", Time: at(7), Created: 11},                      // imported while walked, ahead of the offset: must be there
		{ID: "pairI", Time: at(3).Add(30 * time.Second), Created: 11}, // imported behind the offset ...
		{ID: "pairD", Time: at(4).Add(30 * time.Second), Deleted: 11}, // ... with a deletion behind it: they cancel out
		{ID: "future", Time: at(90), Created: 3},                      // outside the committed windows
		{ID: "unasked", Time: at(30), Created: 0, Deleted: 0},         // must be there
	}
	j := formsim.FormJournal{Pages: pages, Subs: subs}
	tests := []struct {
		name                             string
		got                              map[string]int
		missing, dup, unexpected, expect int
	}{
		{"exact", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1}, 0, 0, 0, 5},
		{"ambiguous kept", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1, "gone": 1, "pairD": 1}, 0, 0, 0, 5},
		{"import while walked missing", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1}, 1, 0, 0, 5},
		{"deleted before the walk written", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1, "old": 1}, 0, 0, 1, 5},
		{"late import written", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1, "late": 1}, 0, 0, 1, 5},
		{"exported then deleted missing", map[string]int{"a": 1, "mid": 1, "unasked": 1, "during": 1}, 1, 0, 0, 5},
		{"duplicate", map[string]int{"a": 2, "b": 1, "mid": 1, "unasked": 1, "during": 1}, 0, 1, 0, 5},
		{"outside written", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1, "future": 1}, 0, 0, 1, 5},
		{"stranger", map[string]int{"a": 1, "b": 1, "mid": 1, "unasked": 1, "during": 1, "zzz": 1}, 0, 0, 1, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(j, covered, tc.got)
			if v.Cancelled != 1 {
				t.Errorf("cancelled pairs %d, want 1 (pairI)", v.Cancelled)
			}
			if v.Missing != tc.missing || v.Duplicated != tc.dup || v.Unexpected != tc.unexpected || v.Expected != tc.expect {
				t.Errorf("verdict %+v, want missing %d dup %d unexpected %d expected %d", v, tc.missing, tc.dup, tc.unexpected, tc.expect)
			}
		})
	}
}
