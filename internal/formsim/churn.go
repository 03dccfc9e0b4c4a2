package formsim

import (
	"slices"
	"strconv"
	"strings"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// changeWhilePaging applies the per-page change faults to the form a page
// was just served from; callers hold s.mu.
func (s *Server) changeWhilePaging(f *formState, fl *Faults) {
	if fl.ArrivalsPerPage <= 0 && fl.BackdatedPerPage <= 0 && fl.EditsPerPage <= 0 && fl.DeletesPerPage <= 0 {
		return
	}
	now := s.nowMs()
	var added []rowRef
	for range fl.ArrivalsPerPage {
		added = append(added, f.add(&createdRow{t: now, updated: now, generated: true}))
		s.inject(FaultArrival, false)
	}
	for range fl.BackdatedPerPage {
		t := f.tl.startMs + s.rng.Int64N(max(now-f.tl.startMs, 1))
		added = append(added, f.add(&createdRow{t: t, updated: max(t, now), generated: true}))
		s.inject(FaultBackdated, false)
	}
	s.stats.Created += int64(len(added))
	const fin = classMask(1 << classFinished)
	for range fl.EditsPerPage {
		n := f.rows.count(fin)
		if n == 0 {
			break
		}
		r, _ := f.rows.nth(fin, s.rng.IntN(n))
		f.edited[r.ord] = max(now, r.t) // submissionTime stays; only lastUpdatedAt moves
		s.inject(FaultEdit, false)
	}
	for range fl.DeletesPerPage {
		n := f.rows.count(fin)
		if n == 0 {
			break
		}
		r, _ := f.rows.nth(fin, s.rng.IntN(n))
		f.rows.remove(r)
		s.journalDeleted(f, r)
		delete(f.edited, r.ord)
		s.stats.Deleted++
		s.inject(FaultDelete, false)
	}
	s.deliver(f, added)
}

// churnMetadata applies the next metadata change of the churn fault, in
// turn: rename, add, change type, add an unknown type. Callers hold s.mu.
func (s *Server) churnMetadata(f *formState) {
	step := f.churn % 4
	f.churn++
	s.inject(FaultChurn, false)
	qs := f.view.questions
	switch step {
	case 0:
		q := qs[s.rng.IntN(len(qs))]
		name := q.name + " (edited)"
		if base, ok := strings.CutSuffix(q.name, " (edited)"); ok {
			name = base
		}
		nq := slices.Clone(qs)
		nq[slices.Index(qs, q)] = q.renamed(name)
		f.view = f.view.with(nq)
	case 1, 3:
		typ, name := "ShortAnswer", "Added question "+strconv.Itoa(f.churn/4+1)
		if step == 3 {
			typ, name = "FancyNewWidget", "Hologram preview "+strconv.Itoa(f.churn/4)
		}
		_ = s.addQuestion(f.view.id, forms.Field{ID: s.newQuestionID(f), Name: name, Type: typ}, true)
	case 2:
		q := qs[s.rng.IntN(len(qs))]
		typ := "ShortAnswer"
		if kindOf(q.current()).shape() == shapeString {
			typ = "NumberInput"
		}
		_ = s.changeType(f.view.id, q.id, typ, true)
	}
}

func (s *Server) newQuestionID(f *formState) string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	for {
		b := make([]byte, 6)
		for i := range b {
			b[i] = alphabet[s.rng.IntN(len(alphabet))]
		}
		if f.view.question(string(b)) < 0 {
			return string(b)
		}
	}
}
