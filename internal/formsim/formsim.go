// Package formsim is an HTTP simulator of the Forms API for tests, the demo
// and benchmarks: deterministic data from a seed, the documented endpoints
// and parameters, both readings of afterDate/beforeDate inclusivity, and
// fault knobs.
package formsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/forms"
)

// BasePath prefixes every endpoint; a client's base URL is server URL + BasePath.
const BasePath = "/v1/api"

// Config shapes the simulated account.
type Config struct {
	APIKey         string
	Seed           int64
	Forms          int // default 3; form 0 holds every documented question type
	Submissions    int // finished submissions per form, default 1000
	Start, End     time.Time
	InclusiveDates bool
	RateLimit      float64 // requests/s; 0 = unlimited
	Now            func() time.Time
}

// Faults are knobs; zero values are off.
type Faults struct {
	ErrorRate       float64       // share of requests answered 500/502/503
	Latency         time.Duration // added to every request
	ArrivalsPerPage int           // new submissions (submissionTime = now) per submissions page served
}

// Stats count what the server did.
type Stats struct {
	Requests          int64
	RateLimited       int64
	InjectedErrors    int64
	PagesServed       int64
	SubmissionsServed int64
	ByStatus          map[int]int64
}

type submission struct {
	id      string
	t       time.Time
	answers []forms.Answer
	deleted bool
}

type form struct {
	meta forms.Form
	subs []*submission // sorted by (t, id)
}

// Server is the simulator; it is an http.Handler.
type Server struct {
	cfg Config

	mu       sync.Mutex
	rng      *rand.Rand
	forms    []*form
	faults   Faults
	stats    Stats
	lastTick time.Time
	tokens   float64
	nextID   int
}

// Documented question types, in the order form 0 asks them.
var documentedTypes = strings.Fields(`Address AudioRecording Calcom Calendly Captcha Checkbox Checkboxes ColorPicker
CurrencyInput DatePicker DateRange DateTimePicker Dropdown EmailInput FileUpload ImagePicker LocationCoordinates
LongAnswer Matrix MultiSelect MultipleChoice NumberInput OpinionScale Password Payment PhoneNumber Ranking
RecordPicker ShortAnswer Signature Slider StarRating Subform SubmissionPicker Switch Table TimePicker URLInput`)

var narrowTypes = []string{"ShortAnswer", "NumberInput", "MultipleChoice", "Checkbox", "DatePicker", "EmailInput"}

// New builds the account from the seed.
func New(cfg Config) (*Server, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("formsim: an API key is required")
	}
	if cfg.Forms <= 0 {
		cfg.Forms = 3
	}
	if cfg.Submissions < 0 {
		return nil, errors.New("formsim: negative submissions")
	}
	if cfg.Submissions == 0 {
		cfg.Submissions = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.End.IsZero() {
		cfg.End = cfg.Now().UTC().Truncate(time.Minute)
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.End.AddDate(0, 0, -30)
	}
	if !cfg.Start.Before(cfg.End) {
		return nil, errors.New("formsim: Start must be before End")
	}
	s := &Server{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)), stats: Stats{ByStatus: map[int]int64{}}}
	for i := 0; i < cfg.Forms; i++ {
		f := &form{meta: forms.Form{ID: fmt.Sprintf("f%02dx%s", i, s.token(8)), Name: fmt.Sprintf("Form %d", i+1)}}
		types := narrowTypes
		if i == 0 {
			types = documentedTypes
		}
		for j, typ := range types {
			f.meta.Questions = append(f.meta.Questions, forms.Field{ID: fmt.Sprintf("q%d%s", j, s.token(4)), Name: questionName(j, typ), Type: typ})
		}
		span := cfg.End.Sub(cfg.Start)
		var prev time.Time
		for k := 0; k < cfg.Submissions; k++ {
			t := cfg.Start.Add(time.Duration(s.rng.Int64N(int64(span)))).Truncate(time.Millisecond)
			if k > 0 && s.rng.IntN(20) == 0 {
				t = prev // ties on purpose
			}
			prev = t
			f.subs = append(f.subs, s.newSubmission(f, t))
		}
		f.sort()
		s.forms = append(s.forms, f)
	}
	return s, nil
}

func questionName(j int, typ string) string {
	names := []string{"Prénom", "Email Address?", "1st choice", "Name", "name", "Rating (1-5)"}
	if j < len(names) {
		return names[j] + " " + typ
	}
	return typ + " question"
}

func (s *Server) token(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[s.rng.IntN(len(alphabet))]
	}
	return string(b)
}

func (f *form) sort() {
	sort.Slice(f.subs, func(i, j int) bool {
		if !f.subs[i].t.Equal(f.subs[j].t) {
			return f.subs[i].t.Before(f.subs[j].t)
		}
		return f.subs[i].id < f.subs[j].id
	})
}

func (s *Server) newSubmission(f *form, t time.Time) *submission {
	s.nextID++
	sub := &submission{id: fmt.Sprintf("s%07d%s", s.nextID, s.token(12)), t: t}
	for _, q := range f.meta.Questions {
		sub.answers = append(sub.answers, forms.Answer{ID: q.ID, Name: q.Name, Type: q.Type, Value: s.value(q.Type, t)})
	}
	return sub
}

func (s *Server) value(typ string, t time.Time) json.RawMessage {
	if s.rng.IntN(25) == 0 {
		return json.RawMessage(`null`)
	}
	r := s.rng
	var v any
	switch typ {
	case "NumberInput", "CurrencyInput", "Slider":
		v = math.Round(r.Float64()*10000) / 100
	case "StarRating", "OpinionScale":
		v = 1 + r.IntN(5)
	case "Checkbox", "Switch":
		v = r.IntN(2) == 0
	case "Checkboxes", "MultiSelect", "Ranking", "ImagePicker":
		v = []string{"red", "green", "blue"}[:1+r.IntN(3)]
	case "DatePicker":
		v = t.AddDate(0, 0, -r.IntN(30)).Format("2006-01-02")
	case "DateTimePicker":
		v = t.Add(-time.Duration(r.IntN(1000)) * time.Minute).Format("2006-01-02T15:04:05.000Z")
	case "TimePicker":
		v = fmt.Sprintf("%02d:%02d", r.IntN(24), r.IntN(60))
	case "DateRange":
		d := t.AddDate(0, 0, r.IntN(10))
		v = map[string]string{"start": d.Format("2006-01-02"), "end": d.AddDate(0, 0, 2).Format("2006-01-02")}
	case "FileUpload", "Signature", "AudioRecording":
		v = []map[string]any{{"url": "https://files.example.com/" + s.token(6), "filename": "f" + s.token(3) + ".png", "type": "image/png", "size": r.IntN(100000)}}
	case "Address":
		v = map[string]string{"address": strconv.Itoa(r.IntN(999)) + " Main St", "city": "Springfield", "state": "IL", "zipCode": "62701", "country": "US"}
	case "LocationCoordinates":
		v = map[string]float64{"latitude": math.Round(r.Float64()*9000) / 100, "longitude": math.Round(r.Float64()*18000) / 100}
	case "Matrix", "Table", "Subform", "Payment", "Calcom", "Calendly", "RecordPicker", "SubmissionPicker":
		v = map[string]any{"k": s.token(4), "n": r.IntN(10)}
	case "ColorPicker":
		v = fmt.Sprintf("#%06x", r.IntN(1<<24))
	case "EmailInput":
		v = s.token(6) + "@example.com"
	default:
		v = "answer " + s.token(5)
	}
	b, _ := json.Marshal(v)
	return b
}

// SetFaults replaces the fault knobs.
func (s *Server) SetFaults(f Faults) { s.mu.Lock(); s.faults = f; s.mu.Unlock() }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.ByStatus = map[int]int64{}
	for k, v := range s.stats.ByStatus {
		out.ByStatus[k] = v
	}
	return out
}

// Close releases the server; it holds nothing that needs stopping.
func (s *Server) Close() error { return nil }

// FormIDs lists the forms in creation order.
func (s *Server) FormIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.forms))
	for i, f := range s.forms {
		ids[i] = f.meta.ID
	}
	return ids
}

func (s *Server) form(id string) *form {
	for _, f := range s.forms {
		if f.meta.ID == id {
			return f
		}
	}
	return nil
}

// Form returns the current metadata of a form.
func (s *Server) Form(id string) (forms.Form, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.form(id)
	if f == nil {
		return forms.Form{}, false
	}
	m := f.meta
	m.Questions = append([]forms.Field(nil), f.meta.Questions...)
	return m, true
}

// ExpectedIDs are every live submission of a form.
func (s *Server) ExpectedIDs(id string) []string {
	return s.ExpectedIDsBetween(id, time.Time{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
}

// ExpectedIDsBetween are the live submissions with time in [start, end).
func (s *Server) ExpectedIDsBetween(id string, start, end time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if f := s.form(id); f != nil {
		for _, sub := range f.subs {
			if !sub.deleted && !sub.t.Before(start) && sub.t.Before(end) {
				out = append(out, sub.id)
			}
		}
	}
	return out
}

func (s *Server) question(formID, qid string) (*form, int, error) {
	f := s.form(formID)
	if f == nil {
		return nil, 0, fmt.Errorf("no form %s", formID)
	}
	for i, q := range f.meta.Questions {
		if q.ID == qid {
			return f, i, nil
		}
	}
	return nil, 0, fmt.Errorf("form %s has no question %s", formID, qid)
}

// RenameQuestion changes a question's name.
func (s *Server) RenameQuestion(formID, qid, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, i, err := s.question(formID, qid)
	if err == nil {
		f.meta.Questions[i].Name = name
	}
	return err
}

// ChangeQuestionType changes a question's type for submissions made later.
func (s *Server) ChangeQuestionType(formID, qid, typ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, i, err := s.question(formID, qid)
	if err == nil {
		f.meta.Questions[i].Type = typ
	}
	return err
}

// AddQuestion appends a question; later submissions answer it.
func (s *Server) AddQuestion(formID string, q forms.Field) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.form(formID)
	if f == nil {
		return fmt.Errorf("no form %s", formID)
	}
	f.meta.Questions = append(f.meta.Questions, q)
	return nil
}

// Insert adds finished submissions at the given times.
func (s *Server) Insert(formID string, times ...time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.form(formID)
	if f == nil {
		return nil, fmt.Errorf("no form %s", formID)
	}
	var ids []string
	for _, t := range times {
		sub := s.newSubmission(f, t.UTC().Truncate(time.Millisecond))
		f.subs = append(f.subs, sub)
		ids = append(ids, sub.id)
	}
	f.sort()
	return ids, nil
}

// Delete marks a submission deleted.
func (s *Server) Delete(formID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.form(formID); f != nil {
		for _, sub := range f.subs {
			if sub.id == id && !sub.deleted {
				sub.deleted = true
				return nil
			}
		}
	}
	return fmt.Errorf("no submission %s in form %s", id, formID)
}
