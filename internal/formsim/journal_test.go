package formsim

import (
	"net/url"
	"slices"
	"testing"
	"time"
)

func TestJournalOrdersPagesAndChanges(t *testing.T) {
	s := start(t, testConfig(4, 1, 20))
	form := s.FormIDs()[0]
	if _, ok := s.Journal(form); ok {
		t.Fatal("the journal answers before EnableJournal")
	}
	s.EnableJournal()
	if e := s.NextEpoch(); e != 1 {
		t.Fatalf("first epoch %d, want 1", e)
	}
	before := s.ExpectedIDs(form)
	q := url.Values{"limit": {"5"}, "afterDate": {"2024-01-10T00:00:00.000Z"}, "beforeDate": {"2024-01-20T00:00:00.000Z"}}
	p := s.page(t, form, q)
	s.NextEpoch()
	if err := s.Delete(form, before[0]); err != nil {
		t.Fatal(err)
	}
	added, err := s.Insert(form, testStart.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s.page(t, form, url.Values{"limit": {"1"}})

	j, ok := s.Journal(form)
	if !ok || len(j.Pages) != 2 {
		t.Fatalf("journal %v %+v, want two pages", ok, j.Pages)
	}
	first, second := j.Pages[0], j.Pages[1]
	wantFrom := time.Date(2024, 1, 10, 0, 0, 0, 1e6, time.UTC)
	if first.Epoch != 1 || second.Epoch != 2 || first.Limit != 5 || !first.From.Equal(wantFrom) || !first.To.Equal(time.Date(2024, 1, 20, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("pages %+v", j.Pages)
	}
	if !second.From.IsZero() || !second.To.IsZero() || !second.Covers(testStart) {
		t.Errorf("an unbounded page %+v", second)
	}
	if len(first.IDs) != len(p.Responses) || (len(p.Responses) > 0 && first.IDs[0] != p.Responses[0].SubmissionID) {
		t.Errorf("page ids %v, served %d", first.IDs, len(p.Responses))
	}
	byID := map[string]JournalSub{}
	for _, sub := range j.Subs {
		byID[sub.ID] = sub
	}
	del, ins := byID[before[0]], byID[added[0]]
	switch {
	case del.Deleted <= first.Seq || del.Deleted >= second.Seq || del.Created != 0:
		t.Errorf("deleted %+v not between pages %d and %d", del, first.Seq, second.Seq)
	case ins.Created < del.Deleted || ins.Created >= second.Seq || ins.Deleted != 0:
		t.Errorf("inserted %+v not after the delete and before page %d", ins, second.Seq)
	}
	if len(j.Subs) != len(before)+1 || !slices.Contains(s.ExpectedIDs(form), added[0]) {
		t.Errorf("%d subs in the journal, want %d", len(j.Subs), len(before)+1)
	}
}
