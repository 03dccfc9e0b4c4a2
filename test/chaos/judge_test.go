package chaos

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// verdict is the exact comparison of one table with what the simulator's
// journal says a correct syncd must and may have written.
//
// For a submission s whose submissionTime lies in a committed window, the
// last request that covered its time belongs to the attempt that committed
// the window (a committed window is never asked for again by a pass; the
// pages of a reconcile that a pass ran are set aside first, see
// passWalkPages). Within that
// attempt's process (epoch), the walk of the window starts with its first
// page and ends with that last request. Then:
//   - must (L): s was created before the walk's last page and was not
//     deleted before it: it must be in the output exactly once. That holds
//     for a submission imported while its window was walked too: the walk
//     notices imports behind its offset (pages overlap by one row) and walks
//     again. The one exception is an import and a deletion behind the
//     offset between the same two pages, which cancel out in every count and
//     offset (Cancelled; the reconcile of committed windows finds those). A
//     submission exported and deleted later is in L (it stays in the output,
//     as the README's Limits say); one imported after the walk into a
//     committed window is not (the live sync does not see it).
//   - may (U): s was served in a page of that walk: the output may hold it,
//     once. A submission deleted while its window was walked is in U but
//     not in L: either outcome is right.
//   - anything else in the output is unexpected.
type verdict struct {
	Expected   int // |L|
	Ambiguous  int // in U but not L: created or deleted while walked
	Found      int // distinct ids in the output
	Duplicated int // ids written more than once
	Missing    int // in L, not in the output
	Unexpected int // in the output, not in U
	Deleted    int // in L although deleted later (exported, then deleted)
	Late       int // alive, in a committed window, imported after it was walked
	Cancelled  int // imported while walked, with a deletion behind the offset between the same two pages

	// Versions (judgePassVersions, judgeVersions).
	Versions           int // versions checked: rows a pass wrote, and the service's version of each submission a reconcile re-read, found
	Tombstones         int // tombstones checked: of a deleted submission that was exported
	DupVersions        int // (submission_id, last_updated_at, _deleted) in the output more than once
	MissingVersions    int // a version the service had when its window was re-read, or a tombstone due, or a row written earlier, not in the output
	UnexpectedVersions int // a version the service never had then, a row outside what was re-read, a tombstone of a live or never exported submission
	LatestDiff         int // submissions whose latest view differs from the service where it was re-read
	Examples           []string
}

func (v verdict) ok() bool {
	return v.Duplicated+v.Missing+v.Unexpected+v.DupVersions+v.MissingVersions+v.UnexpectedVersions+v.LatestDiff == 0
}

func (v *verdict) add(o verdict) {
	v.Expected += o.Expected
	v.Ambiguous += o.Ambiguous
	v.Found += o.Found
	v.Duplicated += o.Duplicated
	v.Missing += o.Missing
	v.Unexpected += o.Unexpected
	v.Deleted += o.Deleted
	v.Late += o.Late
	v.Cancelled += o.Cancelled
	v.Versions += o.Versions
	v.Tombstones += o.Tombstones
	v.DupVersions += o.DupVersions
	v.MissingVersions += o.MissingVersions
	v.UnexpectedVersions += o.UnexpectedVersions
	v.LatestDiff += o.LatestDiff
	v.Examples = append(v.Examples, o.Examples[:min(len(o.Examples), max(0, 8-len(v.Examples)))]...)
}

func (v *verdict) example(format string, args ...any) {
	if len(v.Examples) < 8 {
		v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
	}
}

func contains(covered state.Intervals, t time.Time) bool {
	return covered.Covers(state.Interval{Start: t, End: t.Add(time.Millisecond)})
}

// judge compares got (rows per submission id) with the journal of a form
// and its committed windows.
func judge(j formsim.FormJournal, covered state.Intervals, got map[string]int) verdict {
	var v verdict
	pages := j.Pages
	sort.SliceStable(pages, func(a, b int) bool { return pages[a].Seq < pages[b].Seq })
	known := make(map[string]bool, len(j.Subs))
	timeOf := make(map[string]time.Time, len(j.Subs))
	deletedAt := map[int64][]formsim.JournalSub{}
	for _, s := range j.Subs {
		timeOf[s.ID] = s.Time
		if s.Deleted != 0 {
			deletedAt[s.Deleted] = append(deletedAt[s.Deleted], s)
		}
	}
	// cancelled reports whether s, imported while its window was walked,
	// came with a deletion behind the walk's offset between the same two
	// pages: the next page of the walk starts where it would have without
	// both, so nothing shows that anything changed.
	cancelled := func(s formsim.JournalSub, epoch int, upTo int) bool {
		for _, q := range pages[:upTo] {
			if q.Epoch != epoch || q.Seq < s.Created || q.Limit <= 1 || !q.Covers(s.Time) {
				continue
			}
			if q.Offset == 0 || len(q.IDs) == 0 {
				return false // a walk from the start sees it
			}
			cut := timeOf[q.IDs[0]]
			if s.Time.After(cut) {
				return false // ahead of the offset: paged over
			}
			for _, d := range deletedAt[s.Created] {
				if q.Covers(d.Time) && !d.Time.After(cut) {
					return true
				}
			}
			return false
		}
		return false
	}
	for _, s := range j.Subs {
		known[s.ID] = true
		n := got[s.ID]
		in := contains(covered, s.Time)
		if !in {
			if n > 0 {
				v.Unexpected++
				v.example("%s (%s) is outside the committed windows but written %d times", s.ID, s.Time.Format(time.RFC3339Nano), n)
			}
			continue
		}
		last := -1
		for i := len(pages) - 1; i >= 0; i-- {
			if pages[i].Covers(s.Time) {
				last = i
				break
			}
		}
		var mustHave, mayHave bool
		if last < 0 {
			// No request ever covered it: nothing can have been seen.
			mustHave = s.Deleted == 0
		} else {
			epoch, s1 := pages[last].Epoch, pages[last].Seq
			s0, s0count := int64(-1), int64(-1)
			for _, p := range pages[:last+1] {
				if p.Epoch != epoch || !p.Covers(s.Time) {
					continue
				}
				if s0count < 0 {
					s0count = p.Seq
				}
				if p.Limit > 1 && s0 < 0 {
					s0 = p.Seq
				}
				if p.Limit > 1 {
					for _, id := range p.IDs {
						if id == s.ID {
							mayHave = true
						}
					}
				}
			}
			if s0 < 0 {
				s0 = s0count
			}
			mustHave = s.Created < s1 && (s.Deleted == 0 || s.Deleted > s1)
			if mustHave && s.Created > s0 && !mayHave && cancelled(s, epoch, last+1) {
				mustHave = false
				v.Cancelled++
			}
			if s.Deleted == 0 && s.Created > s1 {
				v.Late++
			}
		}
		switch {
		case mustHave:
			v.Expected++
			if s.Deleted != 0 {
				v.Deleted++
			}
		case mayHave:
			v.Ambiguous++
		}
		switch {
		case n > 1:
			v.Duplicated++
			v.example("%s written %d times", s.ID, n)
		case n == 0 && mustHave:
			v.Missing++
			v.example("%s (%s, created@%d deleted@%d) missing", s.ID, s.Time.Format(time.RFC3339Nano), s.Created, s.Deleted)
		case n > 0 && !mustHave && !mayHave:
			v.Unexpected++
			v.example("%s (%s, created@%d deleted@%d) written although the committing walk never served it", s.ID, s.Time.Format(time.RFC3339Nano), s.Created, s.Deleted)
		}
	}
	for id, n := range got {
		if n > 0 {
			v.Found++
		}
		if !known[id] {
			v.Unexpected++
			v.example("%s is no submission of this form", id)
		}
	}
	return v
}

// reconcileBatch matches the id of a reconcile's batch (<window>-r<ms>).
var reconcileBatch = regexp.MustCompile(`-r[0-9]+$`)

// passCounts counts the rows of each submission id that passes wrote (not
// reconciles): what judge compares with the journal.
func passCounts(rows []testkit.VersionRow) map[string]int {
	got := map[string]int{}
	for _, r := range rows {
		if !reconcileBatch.MatchString(r.Batch) {
			got[r.ID]++
		}
	}
	return got
}

// passWalkPages is a form's pages without those of the reconciles that
// passes ran (see passCounts), for judge: its rule takes the last request
// that covered a submission's time for the walk that committed its window,
// and a reconcile re-reads committed windows later. A submission imported
// after that walk is no pass's to write (the reconcile writes it, in a
// batch of its own), yet the reconcile's page that served it would make it
// one the passes must have written; and one exported, then deleted before
// the reconcile, would look written though never served.
//
// A pass's reconcile re-reads [H - lookback, H) of its committed windows,
// H the pass's horizon: the end of every window it planned, and so the
// latest instant any page of its run reached. Its first window starts
// lookback before H, or up to a second less (its start is taken a moment
// after H); no pass window starts there (they start at the history's
// beginning, at partitions, at counted cuts, or where an earlier run's
// windows ended, seconds before). So a reconcile's pages are:
//   - every page that starts lookback (or up to a second less) before
//     where some run's pages end: its first window, read by its run, or by
//     a later run's redo of its open batch;
//   - every page of the form its run served from that first window on: a
//     pass reconciles once its own windows are committed (its other
//     windows);
//   - the walks of a reconcile batch's window (its id: the window, and
//     when its reconcile began, -r<ms>) served since it began (a later
//     run's redo of one of its other windows).
//
// When no reconcile wrote a batch, nothing is set aside: none found
// anything new to the passes (the last run of the phase finishes any
// reconcile still due), and a backfill never reconciles.
func passWalkPages(form string, pages []formsim.JournalPage, rows []testkit.VersionRow, lookback time.Duration) []formsim.JournalPage {
	horizon := map[int]time.Time{} // the latest end of a page, by run
	ends := map[int64]bool{}       // ... in Unix ms
	for _, p := range pages {
		if p.To.After(horizon[p.Epoch]) {
			horizon[p.Epoch] = p.To
		}
	}
	for _, h := range horizon {
		ends[h.UnixMilli()] = true
	}
	// head reports whether p starts lookback (or up to a second less)
	// before where the pages of a run ended, and own whether that run is
	// p's.
	head := func(p formsim.JournalPage) (head, own bool) {
		if p.From.IsZero() {
			return false, false
		}
		for h := range ends {
			if d := time.UnixMilli(h).Sub(p.From); d <= lookback && d >= lookback-time.Second {
				head = true
				own = own || h == horizon[p.Epoch].UnixMilli()
			}
		}
		return head, own
	}
	began := map[int]time.Time{} // the first page of a run's own reconcile, by run
	for _, p := range pages {
		if _, own := head(p); own {
			if b, ok := began[p.Epoch]; !ok || p.At.Before(b) {
				began[p.Epoch] = p.At
			}
		}
	}
	type rec struct{ start, end, began time.Time }
	var recs []rec
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Batch] {
			continue
		}
		seen[r.Batch] = true
		if n, ok := poller.ParseBatchID(form, r.Batch); ok && n.Reconcile != 0 {
			recs = append(recs, rec{start: n.Start, end: n.End, began: time.UnixMilli(n.Reconcile)})
		}
	}
	if len(recs) == 0 {
		return pages
	}
	out := make([]formsim.JournalPage, 0, len(pages))
	for _, p := range pages {
		b, own := began[p.Epoch]
		drop, _ := head(p)
		drop = drop || (own && !p.At.Before(b))
		for _, r := range recs {
			if p.From.Equal(r.start) && p.To.Equal(r.end) && !p.At.Before(r.began) {
				drop = true
			}
		}
		if !drop {
			out = append(out, p)
		}
	}
	return out
}

// judgePassVersions checks the version of every row a phase of passes
// wrote: each is the version the service had before the phase (before),
// after it (after), or one an edit made while the phase ran (a version
// time in [lo, hi], Unix µs: an edit's version is the service's clock when
// it was made). A submission no change touched therefore has exactly its
// one version. No (submission, version, tombstone) is there twice. A
// tombstone comes only from a reconcile a pass ran (one is due when a kill
// stopped the pass that started the version index before it recorded the
// reconcile's time), of a deleted submission whose version was exported.
func judgePassVersions(rows []testkit.VersionRow, subs []formsim.JournalSub, before, after map[string]testkit.SimVersion, lo, hi int64) verdict {
	var v verdict
	deleted := map[string]bool{}
	for _, s := range subs {
		deleted[s.ID] = s.Deleted != 0
	}
	seen := map[versionKey]int{}
	exported := map[string]bool{}
	for _, r := range rows {
		seen[versionKey{r.ID, r.Updated, r.Deleted}]++
		if !r.Deleted {
			exported[r.ID] = true
		}
	}
	for k, n := range seen {
		if n > 1 {
			v.DupVersions++
			v.example("%s version %s (tombstone %t) written %d times", k.id, us(k.updated), k.deleted, n)
		}
	}
	for _, r := range rows {
		switch b, a := before[r.ID], after[r.ID]; {
		case r.Deleted && reconcileBatch.MatchString(r.Batch) && deleted[r.ID] && exported[r.ID]:
			v.Tombstones++
		case r.Deleted:
			v.UnexpectedVersions++
			v.example("%s: tombstone in batch %s (deleted %t, exported %t)", r.ID, r.Batch, deleted[r.ID], exported[r.ID])
		case r.Updated == b.Updated || r.Updated == a.Updated || (r.Updated >= lo && r.Updated <= hi):
			v.Versions++
		default:
			v.UnexpectedVersions++
			v.example("%s: version %s was never the service's (before %s, after %s, edits in [%s, %s])", r.ID, us(r.Updated), us(b.Updated), us(a.Updated), us(lo), us(hi))
		}
	}
	return v
}

// versionCheck is what judgeVersions compares: a table before and after
// runs that re-read part of it (reconciles; the settling pass and
// reconcile), while the service did not change.
type versionCheck struct {
	Subs    []formsim.JournalSub          // every finished submission the journal knows, deleted ones too
	Before  []testkit.VersionRow          // the table before the runs
	After   []testkit.VersionRow          // ... and after
	Service map[string]testkit.SimVersion // the service while they ran (preview submissions, not in Subs, are ignored)
	Reach   state.Intervals               // what they re-read: the committed windows from their --from on
}

type versionKey struct {
	id      string
	updated int64
	deleted bool
}

// judgeVersions judges versions after runs that re-read Reach while the
// service stood still:
//   - every (submission_id, last_updated_at, _deleted) is in the output at
//     most once;
//   - every row of Before is still there (the output is append-only);
//   - every live submission in Reach has its current version in the
//     output, and its latest view (sink.LatestQuery's order: version, then
//     _synced_at; tombstones dropped) is that version;
//   - every deleted submission in Reach that the output holds has a
//     tombstone, and a tombstone is only ever of a deleted submission the
//     output holds a version of;
//   - a row the runs added lies in Reach and, unless a tombstone, is the
//     service's current version.
func judgeVersions(c versionCheck) verdict {
	var v verdict
	in := func(t int64) bool { return contains(c.Reach, time.UnixMicro(t).UTC()) }
	subs := make(map[string]formsim.JournalSub, len(c.Subs))
	for _, s := range c.Subs {
		subs[s.ID] = s
	}
	after := map[versionKey]int{}
	timeOf := map[versionKey]int64{}
	exported := map[string]bool{} // a version (not a tombstone) is in the output
	tombstoned := map[string]bool{}
	latest := map[string]testkit.VersionRow{}
	for _, r := range c.After {
		k := versionKey{r.ID, r.Updated, r.Deleted}
		after[k]++
		timeOf[k] = r.Time
		if r.Deleted {
			tombstoned[r.ID] = true
		} else {
			exported[r.ID] = true
		}
		if l, ok := latest[r.ID]; !ok || r.Updated > l.Updated || (r.Updated == l.Updated && r.SyncedAt > l.SyncedAt) {
			latest[r.ID] = r
		}
	}
	for k, n := range after {
		if n > 1 {
			v.DupVersions++
			v.example("%s version %s (tombstone %t) written %d times", k.id, us(k.updated), k.deleted, n)
		}
	}
	before := map[versionKey]int{}
	for _, r := range c.Before {
		before[versionKey{r.ID, r.Updated, r.Deleted}]++
	}
	for k, n := range before {
		if after[k] < n {
			v.MissingVersions++
			v.example("%s version %s (tombstone %t) was in the output and is gone", k.id, us(k.updated), k.deleted)
		}
	}
	for k, n := range after {
		if n <= before[k] {
			continue
		}
		switch sv, live := c.Service[k.id]; {
		case !in(timeOf[k]):
			v.UnexpectedVersions++
			v.example("%s version %s (tombstone %t, time %s) written outside what was re-read", k.id, us(k.updated), k.deleted, us(timeOf[k]))
		case !k.deleted && (!live || sv.Updated != k.updated):
			v.UnexpectedVersions++
			v.example("%s version %s written, the service's is %s (listed %t)", k.id, us(k.updated), us(sv.Updated), live)
		}
	}
	for k := range after {
		if !k.deleted {
			continue
		}
		switch s, known := subs[k.id]; {
		case !known || s.Deleted == 0:
			v.UnexpectedVersions++
			v.example("%s has a tombstone but is not deleted (known %t)", k.id, known)
		case !exported[k.id]:
			v.UnexpectedVersions++
			v.example("%s has a tombstone but no version of it was ever written", k.id)
		default:
			v.Tombstones++
		}
	}
	for id, sv := range c.Service {
		if s, ok := subs[id]; !ok || s.Deleted != 0 || !in(sv.Time) {
			continue
		}
		if after[versionKey{id, sv.Updated, false}] == 0 {
			v.MissingVersions++
			v.example("%s (%s): the service's version %s is not in the output", id, us(sv.Time), us(sv.Updated))
		} else {
			v.Versions++
		}
		if l := latest[id]; l.Deleted || l.Updated != sv.Updated {
			v.LatestDiff++
			v.example("%s: the latest view has version %s (tombstone %t), the service %s", id, us(l.Updated), l.Deleted, us(sv.Updated))
		}
	}
	for _, s := range c.Subs {
		if s.Deleted == 0 || !in(s.Time.UnixMicro()) || !exported[s.ID] {
			continue
		}
		if !tombstoned[s.ID] {
			v.MissingVersions++
			v.example("%s (%s) was deleted and re-read, but has no tombstone", s.ID, s.Time.Format(time.RFC3339Nano))
		}
		if l := latest[s.ID]; !l.Deleted {
			v.LatestDiff++
			v.example("%s was deleted, but the latest view still holds version %s", s.ID, us(l.Updated))
		}
	}
	return v
}

// us formats Unix microseconds for examples.
func us(t int64) string { return time.UnixMicro(t).UTC().Format("2006-01-02T15:04:05.000000Z") }
