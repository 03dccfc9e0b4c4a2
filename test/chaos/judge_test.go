package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
)

// verdict is the exact comparison of one table with what the simulator's
// journal says a correct syncd must and may have written.
//
// For a submission s whose submissionTime lies in a committed window, the
// last request that covered its time belongs to the attempt that committed
// the window (a committed window is never asked for again). Within that
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
	Examples   []string
}

func (v verdict) ok() bool { return v.Duplicated+v.Missing+v.Unexpected == 0 }

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
