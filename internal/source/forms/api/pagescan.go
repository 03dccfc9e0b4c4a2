package forms

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/syncd-dev/syncd/internal/jsontext"
)

// scanPage decodes a submissions page of the shape the service sends,
// straight from the bytes: the decoder of every page a sync reads, where a
// reflection-driven decoder spent a tenth of a backfill's CPU and allocated
// a string per answer's id, name and type. It only takes what it is sure to
// decode exactly as encoding/json would, into a page that DecodeSubmissionPage
// would accept, and reports false for anything else (a repeated key, a key
// spelt in another case, an escape in a key, a value of an unexpected type,
// a number that is not an int, a submission without its id or time, a
// missing total), which then goes to the general decoders and their precise
// errors. It validates what it reads as it goes (JSON's grammar, UTF-8 in
// strings, the page's end): a page it takes needs no validation pass, and
// any other input, however broken, is false, never a panic.
//
// Strings that repeat from submission to submission (ids, names and types
// of answers) are shared within a page. The page's answers and times are
// carved from arrays of the page, and raw values are slices of body: a page
// is a few allocations, not a few per submission. A submission kept past
// its page therefore keeps the page's bytes alive; Submission.Clone is the
// copy that does not.
//
// With bufs, the page's arrays are those of the last page scanned into
// bufs, and are left there for the next.
func scanPage(body []byte, bufs *PageBuffers) (*SubmissionPage, bool) {
	s := pageScanner{b: body, intern: make(map[string]string, 64)}
	if bufs == nil {
		return s.page(nil)
	}
	s.pageArrays = bufs.pageArrays.reset()
	page, ok := s.page(bufs.subs[:0])
	bufs.pageArrays = s.pageArrays
	if ok && cap(page.Responses) > cap(bufs.subs) {
		bufs.subs = page.Responses
	}
	return page, ok
}

type pageScanner struct {
	b      []byte
	i      int
	intern map[string]string
	text   []byte // unescaped string scratch
	spaced bool   // a raw value of the current submission has white space in it
	// recent is the shared string read at each position of the last
	// submission (the n-th shared string of a submission is at n), and
	// slot the position in this one: submissions of a form list their
	// answers in the same order, so a string is usually recognised by one
	// comparison, without hashing it for the intern table.
	recent []string
	// recentPlain is whether each recent string came without escapes: it
	// is then its own literal's body, and can be matched in place.
	recentPlain []bool
	slot        int
	sizes       [5]int // elements of each list in the last submission: the next one's capacity

	pageArrays
}

// pageArrays are the arrays of a page that its submissions' answers,
// times, calculations and URL parameters are carved from.
type pageArrays struct {
	answers []Answer
	times   []time.Time
	calcs   []Calculation
	params  []URLParameter
}

// reset empties the arrays for the next page, keeping their memory, and
// drops the last page's strings for the collector.
func (a pageArrays) reset() pageArrays {
	clear(a.answers)
	clear(a.calcs)
	clear(a.params)
	return pageArrays{answers: a.answers[:0], times: a.times[:0], calcs: a.calcs[:0], params: a.params[:0]}
}

// The field names of each object, in the order object reports them; seen
// bits (at most 32 keys) catch repeats.
func pageKeys() []string { return []string{"responses", "totalResponses", "pageCount"} }

func submissionKeys() []string {
	return []string{"submissionId", "submissionTime", "lastUpdatedAt", "startedAt", "questions",
		"calculations", "urlParameters", "scheduling", "payments", "quiz", "login", "documents", "editLink"}
}

func (s *pageScanner) ws() { s.i = skipWS(s.b, s.i) }

// at is the byte at the scanner, 0 at the end of the page (no JSON value
// or separator starts with it).
func (s *pageScanner) at() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// object calls field with the index in keys of each member's key, the
// scanner at the member's value, which field must consume; a member whose
// key is not in keys is skipped. It reports false on anything but a valid
// object, on a repeated or case-folded key, an escaped key, or when field
// does.
func (s *pageScanner) object(keys []string, field func(k int) bool) bool {
	if s.at() != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.at() == '}' {
		s.i++
		return true
	}
	var seen uint32
	next := 0 // the key expected next: objects of a page list their keys in one order
	for {
		k := -1
		var key []byte
		if next < len(keys) && jsontext.LiteralAt(s.b, s.i, keys[next]) {
			// The literal is the key itself (keys hold no quote, escape or
			// control character): no need to scan it.
			k = next
			s.i += len(keys[next]) + 2
		} else {
			var ok bool
			if key, ok = s.literal(); !ok {
				return false
			}
			if bytes.IndexByte(key, '\\') >= 0 {
				return false
			}
			for j, name := range keys {
				if string(key) == name {
					k = j
					break
				}
			}
		}
		s.ws()
		if s.at() != ':' {
			return false
		}
		s.i++
		s.ws()
		if k >= 0 {
			next = k + 1
		}
		switch {
		case k >= 0:
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
			if !field(k) {
				return false
			}
		case folded(key, keys):
			return false // encoding/json folds case: leave it to it
		default:
			if !s.skip() {
				return false
			}
		}
		s.ws()
		switch s.at() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// folded reports whether key is one of keys in another case.
func folded(key []byte, keys []string) bool {
	for _, name := range keys {
		if bytes.EqualFold(key, []byte(name)) {
			return true
		}
	}
	return false
}

// array calls elem with the scanner at each element, which elem must
// consume; anything but a valid array is false.
func (s *pageScanner) array(elem func() bool) bool {
	if s.at() != '[' {
		return false
	}
	s.i++
	s.ws()
	if s.at() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.ws()
		switch s.at() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// null consumes a null; false (consuming nothing) for anything else.
func (s *pageScanner) null() bool {
	if hasLiteral(s.b, s.i, "null") {
		s.i += 4
		return true
	}
	return false
}

// skip consumes any valid value; false if there is none.
func (s *pageScanner) skip() bool {
	end, _ := valueEnd(s.b, s.i, true)
	if end < 0 {
		return false
	}
	s.i = end
	return true
}

// raw consumes a valid value and returns its bytes (null included, as
// json.RawMessage keeps it), a slice of the page; false if there is none.
// A value with white space inside it sets s.spaced.
func (s *pageScanner) raw() ([]byte, bool) {
	start := s.i
	end, spaced := valueEnd(s.b, s.i, true)
	if end < 0 {
		return nil, false
	}
	s.i = end
	s.spaced = s.spaced || spaced
	return s.b[start:end:end], true
}

// str consumes a string into *dst (null leaves it), shared through the
// page's intern table when shared is set; anything else is false.
func (s *pageScanner) str(dst *string, shared bool) bool {
	if s.null() {
		return true
	}
	if shared {
		// The string at this position in the last submission, if it came
		// without escapes, is matched in place: most are the same.
		if slot := s.slot; slot < len(s.recent) && s.recentPlain[slot] && jsontext.LiteralAt(s.b, s.i, s.recent[slot]) {
			s.i += len(s.recent[slot]) + 2
			s.slot++
			*dst = s.recent[slot]
			return true
		}
	}
	body, ok := s.literal()
	if !ok {
		return false
	}
	escaped := bytes.IndexByte(body, '\\') >= 0
	if escaped {
		s.text = jsontext.AppendUnescaped(s.text[:0], body)
		body = s.text
	}
	if !shared {
		*dst = string(body)
		return true
	}
	slot := s.slot
	s.slot++
	if slot < len(s.recent) && s.recent[slot] == string(body) {
		*dst = s.recent[slot]
		return true
	}
	v, ok := s.intern[string(body)]
	if !ok {
		v = string(body)
		if len(s.intern) < 4096 { // a page of free text must not grow it without bound
			s.intern[v] = v
		}
	}
	switch {
	case slot < len(s.recent):
		s.recent[slot], s.recentPlain[slot] = v, !escaped
	case slot == len(s.recent) && slot < 4096:
		s.recent = append(s.recent, v)
		s.recentPlain = append(s.recentPlain, !escaped)
	}
	*dst = v
	return true
}

// literal consumes a valid string literal and returns its body, escapes
// undecoded (a slice of the page).
func (s *pageScanner) literal() ([]byte, bool) {
	if s.at() != '"' {
		return nil, false
	}
	end := stringEnd(s.b, s.i, true)
	if end < 0 {
		return nil, false
	}
	body := s.b[s.i+1 : end-1]
	s.i = end
	return body, true
}

// number consumes a number in JSON's grammar and returns its text.
func (s *pageScanner) number() (string, bool) {
	if c := s.at(); c != '-' && (c < '0' || c > '9') {
		return "", false
	}
	end := numberEnd(s.b, s.i)
	if end < 0 {
		return "", false
	}
	text := string(s.b[s.i:end])
	s.i = end
	return text, true
}

// integer consumes a number that encoding/json would store in an int.
func (s *pageScanner) integer(dst *int) bool {
	text, ok := s.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(text, 10, 0)
	if err != nil {
		return false
	}
	*dst = int(n)
	return true
}

func (s *pageScanner) float(dst **float64) bool {
	if s.null() {
		*dst = nil
		return true
	}
	text, ok := s.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	*dst = &f
	return true
}

// page scans the page; its submissions are appended to subs (nil: a new
// slice).
func (s *pageScanner) page(subs []Submission) (*SubmissionPage, bool) {
	var page SubmissionPage
	var responses, total bool
	s.ws()
	if !s.object(pageKeys(), func(k int) bool {
		switch k {
		case 0:
			responses = true
			if s.null() {
				page.Responses = nil
				return true
			}
			if subs == nil {
				subs = make([]Submission, 0, 150)
			}
			clear(subs[:cap(subs)]) // a shorter page must not keep the last one's submissions alive
			if s.times == nil {
				s.times = make([]time.Time, 0, 2*150)
			}
			ok := s.array(func() bool {
				subs = append(subs, Submission{})
				return s.submission(&subs[len(subs)-1])
			})
			page.Responses = subs
			return ok
		case 1:
			if s.null() {
				return true // as encoding/json: the total stays missing
			}
			total = true
			return s.integer(&page.TotalResponses)
		default:
			if s.null() {
				return true
			}
			return s.integer(&page.PageCount)
		}
	}) {
		return nil, false
	}
	s.ws()
	// What wirePage.page refuses is left to the general decoders, which
	// say why.
	if s.i != len(s.b) || !responses || !total || page.TotalResponses < 0 || page.PageCount < 0 {
		return nil, false
	}
	return &page, true
}

// timestamp consumes a timestamp into *dst; missing, null or "" leave it.
// A timestamp that does not parse is false: the general decoders name it.
func (s *pageScanner) timestamp(dst *time.Time) bool {
	t, present, ok := s.time()
	if present {
		*dst = t
	}
	return ok
}

// optionalTime is timestamp for a time the submission points to, carved
// from the page's times.
func (s *pageScanner) optionalTime(dst **time.Time) bool {
	t, present, ok := s.time()
	if present {
		s.times = append(s.times, t)
		*dst = &s.times[len(s.times)-1]
	}
	return ok
}

// time consumes a timestamp value: present is false for null or "", ok
// false for anything that is not a timestamp.
func (s *pageScanner) time() (t time.Time, present, ok bool) {
	raw, valid := s.raw()
	if !valid {
		return time.Time{}, false, false
	}
	t, present, err := parseTimestamp(raw)
	if err != nil {
		return time.Time{}, false, false
	}
	return t, present, true
}

// carve is an empty slice of capacity n from a page's array (*from),
// which it grows by a page's worth when it runs out: a submission's list
// that outgrows n is reallocated by append, never into its neighbour's.
func carve[T any](from *[]T, n int) []T {
	if *from == nil || cap(*from)-len(*from) < n { // never nil: [] is not absent
		*from = make([]T, 0, max(n*150, 64))
	}
	at := len(*from)
	*from = (*from)[:at+n]
	return (*from)[at : at : at+n]
}

func (s *pageScanner) submission(w *Submission) bool {
	if s.at() != '{' {
		return false // a null submission has no id: refused, with the reason, by the general decoders
	}
	s.spaced, s.slot = false, 0
	if !s.object(submissionKeys(), func(k int) bool {
		switch k {
		case 0:
			return s.str(&w.SubmissionID, false)
		case 1:
			return s.timestamp(&w.SubmissionTime)
		case 2:
			return s.optionalTime(&w.LastUpdatedAt)
		case 3:
			return s.optionalTime(&w.StartedAt)
		case 4:
			return s.list(0, func(n int) { w.Questions = carve(&s.answers, n) }, func() bool {
				w.Questions = append(w.Questions, Answer{})
				a := &w.Questions[len(w.Questions)-1]
				return s.entry(&a.ID, &a.Name, &a.Type, &a.Value)
			})
		case 5:
			return s.list(1, func(n int) { w.Calculations = carve(&s.calcs, n) }, func() bool {
				w.Calculations = append(w.Calculations, Calculation{})
				c := &w.Calculations[len(w.Calculations)-1]
				var raw json.RawMessage
				ok := s.entry(&c.ID, &c.Name, &c.Type, &raw)
				c.Value = scalarText(raw)
				return ok
			})
		case 6:
			return s.list(2, func(n int) { w.URLParameters = carve(&s.params, n) }, func() bool {
				w.URLParameters = append(w.URLParameters, URLParameter{})
				p := &w.URLParameters[len(w.URLParameters)-1]
				var raw json.RawMessage
				ok := s.entry(&p.ID, &p.Name, nil, &raw)
				p.Value = scalarText(raw)
				return ok
			})
		case 7:
			return s.list(3, func(n int) { w.Scheduling = make([]SchedulingEntry, 0, n) }, func() bool {
				w.Scheduling = append(w.Scheduling, SchedulingEntry{})
				e := &w.Scheduling[len(w.Scheduling)-1]
				return s.entry(&e.ID, &e.Name, nil, &e.Value)
			})
		case 8:
			return s.list(4, func(n int) { w.Payments = make([]PaymentEntry, 0, n) }, func() bool {
				w.Payments = append(w.Payments, PaymentEntry{})
				e := &w.Payments[len(w.Payments)-1]
				return s.entry(&e.ID, &e.Name, nil, &e.Value)
			})
		case 9:
			if s.null() {
				w.Quiz = nil
				return true
			}
			q := new(QuizResult)
			w.Quiz = q
			return s.object([]string{"score", "maxScore"}, func(k int) bool {
				if k == 0 {
					return s.float(&q.Score)
				}
				return s.float(&q.MaxScore)
			})
		case 10:
			if s.null() {
				w.Login = nil
				return true
			}
			l := new(Login)
			w.Login = l
			return s.object([]string{"email"}, func(int) bool { return s.str(&l.Email, false) })
		case 11:
			return s.list(-1, func(n int) { w.Documents = make([]Document, 0, n) }, func() bool {
				w.Documents = append(w.Documents, Document{})
				d := &w.Documents[len(w.Documents)-1]
				if s.null() {
					return true
				}
				return s.object([]string{"id", "name", "url"}, func(k int) bool {
					switch k {
					case 0:
						return s.str(&d.ID, false)
					case 1:
						return s.str(&d.Name, false)
					}
					return s.str(&d.URL, false)
				})
			})
		case 12:
			return s.str(&w.EditLink, false)
		}
		return true
	}) {
		return false
	}
	// Every raw value was read by raw(), which checks grammar and UTF-8.
	w.ValuesChecked = !s.spaced
	// A listed submission without its id or time cannot be keyed or
	// windowed: the general decoders refuse the page and say so.
	return w.SubmissionID != "" && !w.SubmissionTime.IsZero()
}

// list decodes an array of objects: null leaves the slice nil, [] makes
// it empty (not nil), as encoding/json does. make is given a capacity
// before the first element: what list kind (an index of s.sizes, -1 for
// none) held in the previous submission.
func (s *pageScanner) list(kind int, make func(n int), elem func() bool) bool {
	if s.null() {
		return true
	}
	if s.at() != '[' {
		return false
	}
	n := 4
	if kind >= 0 {
		n = max(n, s.sizes[kind])
	}
	make(n)
	count := 0
	ok := s.array(func() bool {
		count++
		return elem()
	})
	if kind >= 0 {
		s.sizes[kind] = count
	}
	return ok
}

// entry decodes {id, name, type, value}; typ nil means the entry has no
// type field (the key is then an unknown one, skipped). null leaves the
// zero entry, as encoding/json does.
func (s *pageScanner) entry(id, name, typ *string, value *json.RawMessage) bool {
	if s.null() {
		return true
	}
	keys := []string{"id", "name", "type", "value"}
	if typ == nil {
		keys = []string{"id", "name", "value"} // the key "type" is then an unknown one
	}
	return s.object(keys, func(k int) bool {
		if typ == nil && k == 2 {
			k = 3 // value is third in the short list
		}
		switch k {
		case 0:
			return s.str(id, true)
		case 1:
			return s.str(name, true)
		case 2:
			return s.str(typ, true)
		}
		raw, ok := s.raw()
		*value = raw
		return ok
	})
}
