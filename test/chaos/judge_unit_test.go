package chaos

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
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

func TestJudgeVersions(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) int64 { return t0.Add(time.Duration(m) * time.Minute).UnixMicro() }
	// What was re-read: [0, 60). "out" lies past it.
	reach := state.Intervals{{Start: t0, End: t0.Add(time.Hour)}}
	v1, v2, seen := at(100), at(200), at(300) // versions; seen: the reconcile's tombstone version
	row := func(id string, tm, updated int64, deleted bool) testkit.VersionRow {
		return testkit.VersionRow{ID: id, Time: tm, Updated: updated, SyncedAt: updated, Deleted: deleted}
	}
	subs := []formsim.JournalSub{
		{ID: "a", Time: t0.Add(1 * time.Minute)},                // edited: v1, then v2
		{ID: "b", Time: t0.Add(2 * time.Minute)},                // unchanged
		{ID: "d", Time: t0.Add(3 * time.Minute), Deleted: 9},    // exported, then deleted
		{ID: "x", Time: t0.Add(4 * time.Minute), Deleted: 5},    // deleted before it was ever exported
		{ID: "imp", Time: t0.Add(5 * time.Minute), Created: 11}, // imported back-dated after its window committed
		{ID: "out", Time: t0.Add(90 * time.Minute)},             // edited, outside what was re-read
		{ID: "pre", Time: t0.Add(6 * time.Minute), Created: 13}, // a preview: not finished ...
	}
	subs = subs[:len(subs)-1] // ... so not in the journal's Subs
	before := []testkit.VersionRow{row("a", at(1), v1, false), row("b", at(2), v1, false), row("d", at(3), v1, false), row("out", at(90), v1, false)}
	service := map[string]testkit.SimVersion{"a": {Time: at(1), Updated: v2}, "b": {Time: at(2), Updated: v1}, "imp": {Time: at(5), Updated: v1}, "out": {Time: at(90), Updated: v2}, "pre": {Time: at(6), Updated: v1}}
	exact := append(append([]testkit.VersionRow(nil), before...), row("a", at(1), v2, false), row("imp", at(5), v1, false), row("d", at(3), seen, true))
	without := func(rows []testkit.VersionRow, id string, updated int64) []testkit.VersionRow {
		var out []testkit.VersionRow
		for _, r := range rows {
			if r.ID != id || r.Updated != updated {
				out = append(out, r)
			}
		}
		return out
	}
	with := func(rows []testkit.VersionRow, more ...testkit.VersionRow) []testkit.VersionRow {
		return append(append([]testkit.VersionRow(nil), rows...), more...)
	}
	tests := []struct {
		name                             string
		after                            []testkit.VersionRow
		dup, missing, unexpected, latest int
		versions, tombstones             int
	}{
		{"exact", exact, 0, 0, 0, 0, 3, 1},
		{"a version written twice", with(exact, row("a", at(1), v2, false)), 1, 0, 0, 0, 3, 1},
		{"a tombstone written twice", with(exact, row("d", at(3), seen, true)), 1, 0, 0, 0, 3, 1},
		{"an edit missing", without(exact, "a", v2), 0, 1, 0, 1, 2, 1},
		{"a late import missing", without(exact, "imp", v1), 0, 1, 0, 1, 2, 1},
		{"a tombstone missing", without(exact, "d", seen), 0, 1, 0, 1, 3, 0},
		{"a row written before lost", without(exact, "out", v1), 0, 1, 0, 0, 3, 1},
		{"a tombstone of a live submission", with(exact, row("b", at(2), seen, true)), 0, 0, 1, 1, 3, 1},
		{"a tombstone of a submission never exported", with(exact, row("x", at(4), seen, true)), 0, 0, 1, 0, 3, 1},
		{"a version the service never had", with(exact, row("b", at(2), at(250), false)), 0, 0, 1, 1, 3, 1},
		{"a version written outside what was re-read", with(exact, row("out", at(90), v2, false)), 0, 0, 1, 0, 3, 1},
		{"a preview written", with(exact, row("pre", at(6), v1, false)), 0, 0, 0, 0, 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeVersions(versionCheck{Subs: subs, Before: before, After: tc.after, Service: service, Reach: reach})
			if v.DupVersions != tc.dup || v.MissingVersions != tc.missing || v.UnexpectedVersions != tc.unexpected || v.LatestDiff != tc.latest ||
				v.Versions != tc.versions || v.Tombstones != tc.tombstones {
				t.Errorf("verdict %+v, want dup %d missing %d unexpected %d latest-diff %d versions %d tombstones %d",
					v, tc.dup, tc.missing, tc.unexpected, tc.latest, tc.versions, tc.tombstones)
			}
			if v.ok() != (tc.dup+tc.missing+tc.unexpected+tc.latest == 0) {
				t.Errorf("ok() = %t for %+v", v.ok(), v)
			}
		})
	}
}

func TestJudgePassVersions(t *testing.T) {
	us := func(m int) int64 { return time.Date(2026, 3, 1, 0, m, 0, 0, time.UTC).UnixMicro() }
	// The phase ran from minute 10 to 20: an edit made while it ran has
	// a version in between.
	lo, hi := us(10), us(20)
	before := map[string]testkit.SimVersion{"a": {Updated: us(1)}, "b": {Updated: us(2)}, "d": {Updated: us(2)}}
	after := map[string]testkit.SimVersion{"a": {Updated: us(15)}, "b": {Updated: us(2)}, "c": {Updated: us(12)}}
	subs := []formsim.JournalSub{{ID: "a"}, {ID: "b"}, {ID: "c", Created: 3}, {ID: "d", Deleted: 5}}
	tests := []struct {
		name            string
		row             testkit.VersionRow
		unexpected, dup int
	}{
		{"the version before", testkit.VersionRow{ID: "a", Updated: us(1)}, 0, 0},
		{"the version after", testkit.VersionRow{ID: "a", Updated: us(15)}, 0, 0},
		{"an edit in between", testkit.VersionRow{ID: "a", Updated: us(11)}, 0, 0},
		{"an import of the phase", testkit.VersionRow{ID: "c", Updated: us(12)}, 0, 0},
		{"unchanged, its one version", testkit.VersionRow{ID: "b", Updated: us(2)}, 0, 0},
		{"unchanged, another version", testkit.VersionRow{ID: "b", Updated: us(3)}, 1, 0},
		{"a version after the phase", testkit.VersionRow{ID: "a", Updated: us(25)}, 1, 0},
		{"a version written twice", testkit.VersionRow{ID: "b", Updated: us(2)}, 0, 1},
		{"a tombstone a pass wrote", testkit.VersionRow{ID: "b", Updated: us(15), Deleted: true, Batch: "20260301T000000000Z-20260302T000000000Z-f"}, 1, 0},
		{"a reconcile's tombstone of a live submission", testkit.VersionRow{ID: "b", Updated: us(15), Deleted: true, Batch: "20260301T000000000Z-20260302T000000000Z-f-r1772323200000"}, 1, 0},
		{"a reconcile's tombstone of a deleted submission", testkit.VersionRow{ID: "d", Updated: us(15), Deleted: true, Batch: "20260301T000000000Z-20260302T000000000Z-f-r1772323200000"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := []testkit.VersionRow{tc.row}
			if tc.row.Deleted { // a tombstone follows an exported version
				rows = append(rows, testkit.VersionRow{ID: tc.row.ID, Updated: us(2)})
			}
			if tc.dup > 0 {
				rows = append(rows, tc.row)
			}
			v := judgePassVersions(rows, subs, before, after, lo, hi)
			if v.UnexpectedVersions != tc.unexpected || v.Versions+v.Tombstones != len(rows)-tc.unexpected || v.DupVersions != tc.dup {
				t.Errorf("verdict %+v, want unexpected %d dup %d", v, tc.unexpected, tc.dup)
			}
		})
	}
}

// TestJudgePassReconcile: a pass that reconciles (due when a kill stopped
// the pass that started the version index before it recorded the
// reconcile's time) re-reads committed windows after their walk, and keeps
// doing so in every run until one reconcile ends. A submission imported
// after the walk that committed its window is no pass's to write; the
// reconcile writes it in a batch of its own, which passCounts leaves out.
// The reconciles' pages are not the committing walk's: judge must not take
// one for the last request of that walk (azblob round 6 of seed
// 1795638209530742010, and its rounds 11 and 2 rerun with 200 and 500
// kills, showed it as missing submissions, and exported, then deleted ones
// as unexpected).
func TestJudgePassReconcile(t *testing.T) {
	const form = "f1"
	const lookback = time.Hour
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	wall := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return wall.Add(time.Duration(s * float64(time.Second))) }
	covered := state.Intervals{{Start: at(0), End: at(120)}}
	// Epoch 1 commits [0, 100) (seq 2): "late" is imported into it after
	// (seq 3), "gone" deleted (seq 5). Its reconcile of [40, 100) serves
	// "late" (seq 4) and dies before writing. Epoch 2 commits [100, 110),
	// reconciles [50, 110) (seq 8) and dies too; epoch 3 commits [110, 120)
	// and its reconcile of [60, 120), in two windows, writes "late" and the
	// tombstone of "gone" (seq 12, batch -r<ms> of when it began) and finds
	// nothing new in [90, 120) (seq 14).
	pages := []formsim.JournalPage{
		{Seq: 2, Epoch: 1, From: at(0), To: at(100), Limit: 150, IDs: []string{"a", "b", "gone"}, At: sec(1)},
		{Seq: 4, Epoch: 1, From: at(40), To: at(100), Limit: 150, IDs: []string{"b", "late"}, At: sec(2)},
		{Seq: 6, Epoch: 2, From: at(100), To: at(110), Limit: 150, IDs: []string{"c"}, At: sec(10)},
		{Seq: 8, Epoch: 2, From: at(50), To: at(110), Limit: 150, IDs: []string{"late", "c"}, At: sec(11)},
		{Seq: 10, Epoch: 3, From: at(110), To: at(120), Limit: 150, IDs: []string{"d"}, At: sec(20)},
		{Seq: 12, Epoch: 3, From: at(60), To: at(90), Limit: 150, IDs: []string{"late"}, At: sec(21)},
		{Seq: 14, Epoch: 3, From: at(90), To: at(120), Limit: 150, IDs: []string{"c", "d"}, At: sec(22)},
	}
	subs := []formsim.JournalSub{
		{ID: "a", Time: at(10)},
		{ID: "b", Time: at(45)},
		{ID: "late", Time: at(70), Created: 3},
		{ID: "gone", Time: at(80), Deleted: 5},
		{ID: "c", Time: at(105)},
		{ID: "d", Time: at(115)},
	}
	row := func(id string, m int, batch string, deleted bool) testkit.VersionRow {
		return testkit.VersionRow{ID: id, Time: at(m).UnixMicro(), Batch: batch, Deleted: deleted}
	}
	w1, w2, w3 := poller.BatchID(form, at(0), at(100)), poller.BatchID(form, at(100), at(110)), poller.BatchID(form, at(110), at(120))
	rid := poller.BatchID(form, at(60), at(90)) + "-r" + strconv.FormatInt(sec(20.5).UnixMilli(), 10)
	rows := []testkit.VersionRow{row("a", 10, w1, false), row("b", 45, w1, false), row("gone", 80, w1, false), row("c", 105, w2, false),
		row("d", 115, w3, false), row("late", 70, rid, false), row("gone", 80, rid, true)}

	kept := passWalkPages(form, pages, rows, lookback)
	var seqs []int64
	for _, p := range kept {
		seqs = append(seqs, p.Seq)
	}
	if want := []int64{2, 6, 10}; !slices.Equal(seqs, want) {
		t.Fatalf("pages kept %v, want %v (the walks of passes)", seqs, want)
	}
	if v := judge(formsim.FormJournal{Pages: slices.Clone(pages), Subs: subs}, covered, passCounts(rows)); v.Missing != 1 || v.Unexpected != 1 {
		t.Errorf("with the reconciles' pages, judge finds %d missing and %d unexpected, want 1 and 1 (the mistake passWalkPages avoids): %+v", v.Missing, v.Unexpected, v)
	}
	v := judge(formsim.FormJournal{Pages: kept, Subs: subs}, covered, passCounts(rows))
	if v.Missing != 0 || v.Unexpected != 0 || v.Duplicated != 0 || v.Expected != 5 || v.Deleted != 1 || v.Late != 1 {
		t.Errorf("verdict %+v, want 5 expected (1 deleted since), none missing or unexpected, 1 late", v)
	}
	// A submission the committing walk served and the pass lost is still
	// missing, even though a reconcile wrote it.
	lost := slices.Clone(rows)
	lost[3].Batch = rid
	if v := judge(formsim.FormJournal{Pages: passWalkPages(form, pages, lost, lookback), Subs: subs}, covered, passCounts(lost)); v.Missing != 1 {
		t.Errorf("a row the pass lost: %d missing, want 1: %+v", v.Missing, v)
	}
	// Without a reconcile batch (no reconcile found anything; a backfill)
	// nothing is set aside.
	if got := passWalkPages(form, pages, rows[:5], lookback); len(got) != len(pages) {
		t.Errorf("no reconcile batch: %d of %d pages kept", len(got), len(pages))
	}
}
