package formsim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// epoch is one type of a question, from row ordinal from onwards (rows are
// numbered in creation order, so an epoch is a point in the form's history).
type epoch struct {
	from   uint32
	typ    string
	kind   kind
	prefix []byte // `{"id":…,"name":…,"type":…,"value":`, prebuilt per epoch
}

// question is immutable once built: metadata changes build a new one, so a
// page rendered outside the server's lock sees one consistent form.
type question struct {
	id, name string
	key      uint64   // seeds the question's value stream; from the id, so adding questions moves no value
	since    uint32   // rows created before the question existed answer null
	opts     []string // choices of a choice question
	epochs   []epoch
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return mix64(h)
}

func newQuestion(id, name, typ string, since uint32) *question {
	q := &question{id: id, name: name, key: hashString(id), since: since}
	q.opts = optionsFor(kindOf(typ), name)
	q.epochs = []epoch{q.epoch(since, typ)}
	return q
}

func (q *question) epoch(from uint32, typ string) epoch {
	b := append([]byte(`{"id":`), appendString(nil, q.id)...)
	b = append(b, `,"name":`...)
	b = appendString(b, q.name)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"value":`...)
	k := kindOf(typ)
	if k == kShortAnswer && strings.Contains(strings.ToLower(q.name), "mail") {
		k = kEmail // a free-text question asking for an e-mail gets e-mails
	}
	return epoch{from: from, typ: typ, kind: k, prefix: b}
}

// epochAt is the type row ord was answered under.
func (q *question) epochAt(ord uint32) *epoch {
	for i := len(q.epochs) - 1; i > 0; i-- {
		if q.epochs[i].from <= ord {
			return &q.epochs[i]
		}
	}
	return &q.epochs[0]
}

func (q *question) current() string { return q.epochs[len(q.epochs)-1].typ }

func (q *question) renamed(name string) *question {
	n := *q
	n.name = name
	n.epochs = make([]epoch, len(q.epochs))
	for i, e := range q.epochs {
		n.epochs[i] = n.epoch(e.from, e.typ)
	}
	return &n
}

// retyped changes the type for rows from ordinal from; from 0 rewrites the
// whole history (every row then answers with the new type's shape).
func (q *question) retyped(typ string, from uint32) *question {
	n := *q
	n.opts = optionsFor(kindOf(typ), q.name)
	if from == 0 {
		n.since = 0
		n.epochs = []epoch{n.epoch(0, typ)}
		return &n
	}
	n.epochs = append(slices.Clip(q.epochs), n.epoch(max(from, q.since), typ))
	return &n
}

// field is a calculation, URL parameter, scheduling or payment field with
// its prebuilt JSON prefix.
type field struct {
	forms.Field
	key    uint64
	prefix []byte
}

func newField(f forms.Field) field {
	b := append([]byte(`{"id":`), appendString(nil, f.ID)...)
	b = append(b, `,"name":`...)
	b = appendString(b, f.Name)
	if f.Type != "" {
		b = append(b, `,"type":`...)
		b = appendString(b, f.Type)
	}
	b = append(b, `,"value":`...)
	return field{Field: f, key: hashString(f.ID), prefix: b}
}

// formView is an immutable snapshot of what a form renders with. Changes
// replace the whole view, so pages and webhook deliveries encode outside the
// server's lock.
type formView struct {
	idx       int
	id, name  string
	key       uint64
	ids       idCodec
	endMs     int64
	questions []*question
	calcs     []field
	urlParams []field
	sched     []field
	pays      []field
	quiz      bool
	login     bool
	documents bool
	startedAt bool
	meta      forms.Form
}

func (v *formView) with(qs []*question) *formView {
	n := *v
	n.questions = qs
	n.buildMeta()
	return &n
}

func (v *formView) buildMeta() {
	m := forms.Form{ID: v.id, Name: v.name, Questions: make([]forms.Field, len(v.questions))}
	for i, q := range v.questions {
		m.Questions[i] = forms.Field{ID: q.id, Name: q.name, Type: q.current()}
	}
	plain := func(fs []field) []forms.Field {
		var out []forms.Field
		for _, f := range fs {
			out = append(out, f.Field)
		}
		return out
	}
	m.Calculations = plain(v.calcs)
	m.URLParameters = plain(v.urlParams)
	m.Scheduling = plain(v.sched)
	m.Payments = plain(v.pays)
	if v.quiz {
		m.Quiz = &forms.QuizSetting{Enabled: true}
	}
	v.meta = m
}

// copyMeta returns the metadata with slices a caller may modify.
func (v *formView) copyMeta() forms.Form {
	m := v.meta
	m.Questions = slices.Clone(m.Questions)
	m.Calculations = slices.Clone(m.Calculations)
	m.URLParameters = slices.Clone(m.URLParameters)
	m.Scheduling = slices.Clone(m.Scheduling)
	m.Payments = slices.Clone(m.Payments)
	if m.Quiz != nil {
		q := *m.Quiz
		m.Quiz = &q
	}
	return m
}

func (v *formView) question(id string) int {
	return slices.IndexFunc(v.questions, func(q *question) bool { return q.id == id })
}

// createdRow is a submission added after the generated history: through the
// create endpoint (answers as sent) or Insert and arrival faults (generated
// answers). It never changes once stored; edits live in formState.edited.
type createdRow struct {
	t, updated int64
	generated  bool
	answers    map[string]json.RawMessage
	urlParams  []forms.URLParameter
	sched      map[string]json.RawMessage
	pays       map[string]json.RawMessage
}

// timeline places the generated rows in time. A row's time is a function of
// its ordinal, monotone in it, so the generated history needs no storage
// beyond the index and an id (which carries the ordinal) leads straight to
// its row. A daily cycle makes the density uneven, and a few rows share their
// predecessor's time exactly (ties), some in groups of three or more.
type timeline struct {
	key     uint64
	startMs int64
	spanMs  int64
	n       uint32
	cycles  float64
}

const (
	tiePerMille      = 25  // a row shares the previous row's time
	tieAgainPerMille = 400 // ... and the next one too, after a tie
)

func (tl *timeline) h(x uint32, salt uint64) uint64 { return mix64(tl.key ^ salt ^ uint64(x)*golden) }

func (tl *timeline) tie(x uint32) bool {
	if x == 0 {
		return false
	}
	if tl.h(x, 1)%1000 < tiePerMille {
		return true
	}
	return tl.h(x-1, 1)%1000 < tiePerMille && tl.h(x, 2)%1000 < tieAgainPerMille
}

func (tl *timeline) at(x uint32) int64 {
	for x > 0 && tl.tie(x) {
		x--
	}
	u := (float64(x) + float64(tl.h(x, 3)>>11)/(1<<53)) / float64(tl.n)
	// w is strictly increasing for an amplitude below 1, with w(0)=0, w(1)=1.
	w := u + 0.6*math.Sin(2*math.Pi*tl.cycles*u)/(2*math.Pi*tl.cycles)
	off := int64(w * float64(tl.spanMs))
	off = min(max(off, 0), tl.spanMs-1)
	return tl.startMs + off
}

// formState is a form's mutable state, guarded by Server.mu.
type formState struct {
	view      *formView
	tags      []string
	tl        timeline
	gen       uint32 // generated rows have ordinals [0, gen)
	created   []*createdRow
	edited    map[uint32]int64 // ordinal -> lastUpdatedAt (ms) after an edit
	rows      index
	metaReads int64
	churn     int
}

func (f *formState) nextOrd() uint32 { return f.gen + uint32(len(f.created)) }

// timeOf returns a row's submission time from its ordinal alone.
func (f *formState) timeOf(ord uint32) (int64, bool) {
	if ord < f.gen {
		return f.tl.at(ord), true
	}
	if i := int(ord - f.gen); i < len(f.created) {
		return f.created[i].t, true
	}
	return 0, false
}

// lookup finds a live row by ordinal.
func (f *formState) lookup(ord uint32) (rowRef, bool) {
	t, ok := f.timeOf(ord)
	if !ok {
		return rowRef{}, false
	}
	r, ok := f.rows.find(rec{t: t, ord: ord})
	if !ok {
		return rowRef{}, false
	}
	return f.ref(r), true
}

func (f *formState) ref(r rec) rowRef {
	ref := rowRef{r: r, updated: f.edited[r.ord]}
	if r.ord >= f.gen {
		ref.cr = f.created[r.ord-f.gen]
	}
	return ref
}

// add stores a created row and indexes it as finished.
func (f *formState) add(cr *createdRow) rowRef {
	ord := f.nextOrd()
	f.created = append(f.created, cr)
	r := rec{t: cr.t, ord: ord, cls: classFinished}
	f.rows.insert(r)
	return rowRef{r: r, cr: cr}
}

// buildForm generates form i of the account.
func buildForm(cfg *Config, ids idCodec, rnd *rand.Rand, i int, taken map[string]bool) *formState {
	tokenFrom := func(r *rand.Rand, n int, alphabet string) string {
		b := make([]byte, n)
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	token := func(n int, alphabet string) string { return tokenFrom(rnd, n, alphabet) }
	const lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	const mixedAlnum = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	id := token(12, lowerAlnum)
	for taken[id] {
		id = token(12, lowerAlnum)
	}
	taken[id] = true
	v := &formView{idx: i, id: id, name: formNames[i%len(formNames)], key: mix64(uint64(cfg.Seed) ^ uint64(i+1)*golden), ids: ids}
	if i >= len(formNames) {
		v.name = fmt.Sprintf("%s #%d", v.name, i/len(formNames)+1)
	}
	fieldIDFrom := func(r *rand.Rand, used map[string]bool) string {
		for {
			if s := tokenFrom(r, 6, mixedAlnum); !used[s] {
				used[s] = true
				return s
			}
		}
	}
	fieldID := func(used map[string]bool) string { return fieldIDFrom(rnd, used) }
	used := map[string]bool{}
	var defs []qdef
	drawn := -1 // question ids the account's source draws; -1: every one
	if i == 0 {
		defs = form0Questions
		v.calcs = []field{
			newField(forms.Field{ID: fieldID(used), Name: "Total price", Type: "number"}),
			newField(forms.Field{ID: fieldID(used), Name: "Summary", Type: "text"}),
			newField(forms.Field{ID: fieldID(used), Name: "Time to complete", Type: "duration"}),
		}
		v.urlParams = []field{
			newField(forms.Field{ID: "utm_source", Name: "utm_source"}),
			newField(forms.Field{ID: "ref", Name: "ref"}),
		}
		v.sched = []field{newField(forms.Field{ID: fieldID(used), Name: "Onboarding call"})}
		v.pays = []field{newField(forms.Field{ID: fieldID(used), Name: "Deposit"})}
		v.quiz, v.login, v.documents, v.startedAt = true, true, true, true
	} else {
		defs = slices.Clone(narrowBase)
		pool := slices.Clone(narrowPool)
		rnd.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
		extra := rnd.IntN(5)
		if i < len(cfg.Shapes) && cfg.Shapes[i].Questions > 0 {
			// The account's source still draws the ids of the questions the
			// form would have had, and a source of the form's own the rest,
			// so that shaping one form moves no other form's questions or
			// values, nor its own rows.
			drawn = len(defs) + extra
			pool = append(pool, realisticExtras...)
			extra = min(max(cfg.Shapes[i].Questions-len(defs), 0), len(pool))
		}
		defs = append(defs, pool[:extra]...)
		if i%2 == 1 {
			v.calcs = []field{newField(forms.Field{ID: fieldID(used), Name: "Score", Type: "number"})}
		}
		if i%3 == 1 {
			v.urlParams = []field{newField(forms.Field{ID: "utm_source", Name: "utm_source"})}
		}
		v.quiz = i%4 == 2
		v.startedAt = i%2 == 0
	}
	if drawn < 0 {
		drawn = len(defs)
	}
	qids := make([]string, max(drawn, len(defs)))
	for j := range drawn {
		qids[j] = fieldID(used)
	}
	own := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)|1<<40))
	for j := drawn; j < len(defs); j++ {
		qids[j] = fieldIDFrom(own, used)
	}
	for j, d := range defs {
		v.questions = append(v.questions, newQuestion(qids[j], d.name, d.typ, 0))
	}
	v.buildMeta()

	f := &formState{view: v, tags: slices.Clone(formTags[i%len(formTags)]), edited: map[uint32]int64{}}
	n, start := cfg.Submissions, cfg.Start
	if i < len(cfg.Shapes) {
		if sh := cfg.Shapes[i]; sh.Submissions > 0 && sh.Submissions <= MaxSubmissions {
			n = sh.Submissions
		}
		if sh := cfg.Shapes[i]; !sh.Start.IsZero() && sh.Start.Before(cfg.End) {
			start = sh.Start
		}
	}
	startMs := start.Add(time.Millisecond - 1).UnixMilli() // first whole ms at or after Start
	endMs := cfg.End.Add(time.Millisecond - 1).UnixMilli()
	v.endMs = endMs
	span := endMs - startMs
	preview, progress := 1+n/200, 2+n/100
	total := n + preview + progress
	f.gen = uint32(total)
	f.tl = timeline{key: v.key, startMs: startMs, spanMs: max(span, 1), n: f.gen,
		cycles: max(1, math.Round(float64(span)/float64(dayMs)))}

	// Spread the preview and in-progress rows evenly, one per stride, and
	// interleave the two classes the same way.
	extras := preview + progress
	next, j := -1, 0
	pickNext := func() {
		if j >= extras {
			next = -1
			return
		}
		lo, hi := j*total/extras, (j+1)*total/extras
		next = lo + rnd.IntN(max(hi-lo, 1))
	}
	pickNext()
	for ord := 0; ord < total; ord++ {
		r := rec{t: f.tl.at(uint32(ord)), ord: uint32(ord), cls: classFinished}
		if ord == next {
			r.cls = classInProgress
			if (j+1)*preview/extras > j*preview/extras {
				r.cls = classPreview
			}
			j++
			pickNext()
		}
		f.rows.appendSorted(r)
	}
	return f
}
