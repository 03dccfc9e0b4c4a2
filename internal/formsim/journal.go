package formsim

import (
	"net/url"
	"sort"
	"time"
)

// The journal records, in one total order, every submissions page the
// simulator served and every submission it created or deleted afterwards,
// so that a test can say exactly which submissions a client that paged a
// window could have seen (served to it) and which it must have seen (alive
// from the first page of its walk to its last request). It is off until
// EnableJournal and costs nothing then.

// journal is guarded by Server.mu.
type journal struct {
	seq     int64 // pages take even numbers; changes after a page, odd ones
	epoch   int
	pages   map[int][]JournalPage    // by form index
	created map[int]map[uint32]int64 // form index -> ordinal -> seq
	deleted map[int]map[uint32]int64 // form index -> ordinal -> seq
}

// JournalPage is one answered GET /forms/{id}/submissions.
type JournalPage struct {
	Seq   int64 // position in the journal's order
	Epoch int   // the epoch (client process) it was served in
	// The client's half-open range: [After+1ms, Before), read as exclusive
	// bounds whatever Config.InclusiveDates says. Zero times are unbounded.
	From, To time.Time
	Limit    int
	Offset   int
	IDs      []string // the submissions in the page, in order
	// At is when it was served, on the host's wall clock (not Config.Now):
	// a client's own timestamps, such as the start of a reconcile in its
	// batch ids, can be compared with it.
	At time.Time
}

// Covers reports whether t lies in the page's client range.
func (p JournalPage) Covers(t time.Time) bool {
	return (p.From.IsZero() || !t.Before(p.From)) && (p.To.IsZero() || t.Before(p.To))
}

// JournalSub is one finished submission that existed at some point while
// the journal was on (or before it).
type JournalSub struct {
	ID      string
	Time    time.Time // submissionTime
	Created int64     // journal seq of its creation; 0: before the journal
	Deleted int64     // journal seq of its deletion; 0: still there
}

// FormJournal is a copy of what the journal holds about one form.
type FormJournal struct {
	Pages []JournalPage // in Seq order
	Subs  []JournalSub  // live finished submissions and every deleted one
}

// EnableJournal starts recording pages, creations and deletions. Calling it
// again keeps what was recorded.
func (s *Server) EnableJournal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal == nil {
		s.journal = &journal{pages: map[int][]JournalPage{}, created: map[int]map[uint32]int64{}, deleted: map[int]map[uint32]int64{}}
	}
}

// NextEpoch starts a new epoch and returns it: a test calls it before it
// starts each client process, so that pages can be told apart by process.
func (s *Server) NextEpoch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal == nil {
		return 0
	}
	s.journal.epoch++
	return s.journal.epoch
}

// Journal returns what the journal holds about a form; ok is false when
// the journal is off or the form unknown.
func (s *Server) Journal(formID string) (FormJournal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.byID[formID]
	if s.journal == nil || f == nil {
		return FormJournal{}, false
	}
	j := s.journal
	idx := f.view.idx
	var out FormJournal
	for _, p := range j.pages[idx] {
		p.IDs = append([]string(nil), p.IDs...)
		out.Pages = append(out.Pages, p)
	}
	sub := func(ord uint32, t int64) JournalSub {
		return JournalSub{ID: s.ids.id(idx, ord), Time: time.UnixMilli(t).UTC(), Created: j.created[idx][ord], Deleted: j.deleted[idx][ord]}
	}
	const fin = classMask(1 << classFinished)
	f.rows.walk(fin, minTime, maxTime, 0, func(r rec, _ *block) bool {
		out.Subs = append(out.Subs, sub(r.ord, r.t))
		return true
	}, false)
	dels := make([]uint32, 0, len(j.deleted[idx]))
	for ord := range j.deleted[idx] {
		dels = append(dels, ord)
	}
	sort.Slice(dels, func(a, b int) bool { return dels[a] < dels[b] })
	for _, ord := range dels {
		if t, ok := f.timeOf(ord); ok {
			out.Subs = append(out.Subs, sub(ord, t))
		}
	}
	return out, true
}

// journalPage records a served page; callers hold s.mu.
func (s *Server) journalPage(f *formState, q url.Values, p *listParams, refs []rowRef) {
	j := s.journal
	if j == nil || p.search != "" || p.mask != 1<<classFinished {
		return
	}
	j.seq += 2
	if j.seq%2 != 0 {
		j.seq++
	}
	pg := JournalPage{Seq: j.seq, Epoch: j.epoch, Limit: p.limit, Offset: p.offset, IDs: make([]string, len(refs)), At: time.Now()}
	if t, err := parseDate(q.Get("afterDate")); err == nil {
		pg.From = time.UnixMilli(floorMs(t) + 1).UTC()
	}
	if t, err := parseDate(q.Get("beforeDate")); err == nil {
		pg.To = time.UnixMilli(ceilMs(t)).UTC()
	}
	for i, ref := range refs {
		pg.IDs[i] = s.ids.id(f.view.idx, ref.r.ord)
	}
	j.pages[f.view.idx] = append(j.pages[f.view.idx], pg)
}

// changeSeq is the seq of a change: after the last page, before the next.
func (j *journal) changeSeq() int64 {
	if j.seq%2 == 0 {
		j.seq++
	}
	return j.seq
}

// journalCreated records created rows; callers hold s.mu.
func (s *Server) journalCreated(f *formState, refs []rowRef) {
	j := s.journal
	if j == nil || len(refs) == 0 {
		return
	}
	m := j.created[f.view.idx]
	if m == nil {
		m = map[uint32]int64{}
		j.created[f.view.idx] = m
	}
	seq := j.changeSeq()
	for _, ref := range refs {
		m[ref.r.ord] = seq
	}
}

// journalDeleted records a deleted finished row; callers hold s.mu.
func (s *Server) journalDeleted(f *formState, r rec) {
	j := s.journal
	if j == nil || r.cls != classFinished {
		return
	}
	m := j.deleted[f.view.idx]
	if m == nil {
		m = map[uint32]int64{}
		j.deleted[f.view.idx] = m
	}
	m[r.ord] = j.changeSeq()
}
