// Package formsim is an HTTP simulator of the Forms API (Fillout's public REST
// API as described in shared/spec) for tests, the demo and benchmarks.
//
// It serves every documented endpoint and query parameter under BasePath,
// with deterministic data from a seed: form 0 asks every documented question
// type plus calculations, URL parameters, scheduling, payments, quiz, login
// and documents; other forms are narrower. Ties on submissionTime, preview
// and in-progress submissions, empty answers, both readings of
// afterDate/beforeDate inclusivity, a rate limit, webhooks and a set of
// fault knobs (Faults) make it behave like the real service on a bad day.
//
// It is lean: a submission costs 16 bytes (time, row ordinal, class) in a
// blocked sorted index; ids, answers and every other field are generated
// from (seed, form, ordinal) when a page is served, so a million
// submissions take a few tens of megabytes.
package formsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/syncd-dev/syncd/internal/simhook"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// BasePath prefixes every endpoint; a client's base URL is server URL + BasePath.
const BasePath = "/v1/api"

// Config shapes the simulated account.
type Config struct {
	APIKey      string
	Seed        int64
	Forms       int // default 3; form 0 holds every documented question type
	Submissions int // finished submissions per form, default 1000 (plus a few preview and in-progress)
	// Submission times spread over [Start, End); zero: End = Now() truncated
	// to the minute, Start = End - 30 days.
	Start, End time.Time
	// InclusiveDates makes afterDate/beforeDate keep submissions at exactly
	// those instants; false excludes them. The service documents neither.
	InclusiveDates bool
	RateLimit      float64 // requests per second for the key; 0 = unlimited
	RateBurst      int     // token bucket size; 0 = max(1, RateLimit), one second's worth
	// Now is the clock of the data: default submission times of created
	// submissions, arrivals and edits. The rate limiter and delays use real
	// time. Default time.Now.
	Now func() time.Time
	// WebhookTimeout bounds one webhook delivery; default 5s.
	WebhookTimeout time.Duration
	// WebhookFaults are the delivery faults (drops, duplicates, delays,
	// bare bodies), drawn from Seed; SetWebhookFaults changes them later.
	WebhookFaults simhook.Faults
	// Shapes, when set, shape form i (an account has sparse forms and
	// dense ones): a zero field keeps Submissions or Start.
	Shapes []FormShape
}

// FormShape is one form's size and history.
type FormShape struct {
	Submissions int
	Start       time.Time
	// Questions, when set on a form other than form 0, asks that many
	// questions of everyday types (the narrow pool first, then common types
	// of form 0's list; at most 24): a "realistic" form for
	// benchmarks, between the narrow forms and the wide one.
	Questions int
}

// MaxSubmissions bounds Config.Submissions (row ordinals are 32-bit).
const MaxSubmissions = 100_000_000

// ErrNotFound is returned (wrapped) for an unknown form, question or submission.
var ErrNotFound = errors.New("not found")

// Server is the simulator; it is an http.Handler. Its methods are safe for
// concurrent use.
type Server struct {
	cfg     Config
	ids     idCodec
	limiter *rate.Limiter // nil: unlimited
	bufs    sync.Pool     // *[]byte response buffers
	bad     atomic.Int64  // misfit answers rendered (rendering runs outside mu)

	hooksOut  *simhook.Deliverer // webhook deliveries, with their faults
	admin     *http.ServeMux     // AdminPrefix endpoints (webhook.go)
	ctx       context.Context    // cancelled by Close: ends injected delays
	cancel    context.CancelFunc
	closeOnce sync.Once

	mu        sync.Mutex
	closed    bool
	rng       *rand.Rand // every random decision after New; never the global source
	forms     []*formState
	byID      map[string]*formState
	faults    Faults
	stats     Stats
	admitted  int64 // requests past auth and the limiter, for burst faults
	burstLeft int
	hooks     map[int64]webhook
	journal   *journal // nil unless EnableJournal
	nextHook  int64
}

type webhook struct{ formID, url string }

// New builds the account from the seed.
func New(cfg Config) (*Server, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("formsim: an API key is required")
	}
	switch {
	case cfg.Forms < 0:
		return nil, fmt.Errorf("formsim: Forms %d is negative", cfg.Forms)
	case cfg.Forms == 0:
		cfg.Forms = 3
	case cfg.Forms > 10_000:
		return nil, fmt.Errorf("formsim: Forms %d is more than 10000", cfg.Forms)
	}
	switch {
	case cfg.Submissions < 0:
		return nil, fmt.Errorf("formsim: Submissions %d is negative", cfg.Submissions)
	case cfg.Submissions == 0:
		cfg.Submissions = 1000
	case cfg.Submissions > MaxSubmissions:
		return nil, fmt.Errorf("formsim: Submissions %d is more than %d", cfg.Submissions, MaxSubmissions)
	}
	if cfg.RateLimit < 0 || cfg.RateBurst < 0 {
		return nil, errors.New("formsim: RateLimit and RateBurst must not be negative")
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
	if cfg.End.Sub(cfg.Start) < time.Millisecond {
		return nil, fmt.Errorf("formsim: Start %s must be at least 1ms before End %s", cfg.Start, cfg.End)
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = 5 * time.Second
	}
	// Its own source, so delivery faults do not shift the data's draws.
	hooksOut, err := simhook.New(uint64(cfg.Seed)^0xf0e5_400c, cfg.WebhookTimeout, cfg.WebhookFaults)
	if err != nil {
		return nil, fmt.Errorf("formsim: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		ids:      newIDCodec(cfg.Seed),
		ctx:      ctx,
		cancel:   cancel,
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed_f0e5)),
		byID:     map[string]*formState{},
		stats:    Stats{Injected: map[FaultKind]int64{}, ByStatus: map[int]int64{}},
		hooks:    map[int64]webhook{},
		hooksOut: hooksOut,
	}
	s.admin = s.routeAdmin()
	s.bufs.New = func() any { b := make([]byte, 0, 64<<10); return &b }
	if cfg.RateLimit > 0 {
		burst := cfg.RateBurst
		if burst == 0 {
			burst = max(1, int(cfg.RateLimit))
		}
		s.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), burst)
	}
	taken := map[string]bool{}
	for i := 0; i < cfg.Forms; i++ {
		f := buildForm(&s.cfg, s.ids, s.rng, i, taken)
		s.forms = append(s.forms, f)
		s.byID[f.view.id] = f
	}
	s.nextHook = 12345 + s.rng.Int64N(1000)
	return s, nil
}

// Close stops webhook deliveries in flight and waits for them, and ends
// pending injected delays early. It does not stop an http.Server serving s.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.hooksOut.Close()
	})
	return nil
}

// SetFaults replaces the fault knobs.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	if f.RateLimitBurstEvery <= 0 {
		s.burstLeft = 0
	}
}

// Faults returns the current fault knobs.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := s.stats.clone()
	s.mu.Unlock()
	st.Webhooks = s.hooksOut.Stats()
	st.WebhooksDelivered, st.WebhookFailures = st.Webhooks.Delivered, st.Webhooks.Failed
	if n := s.bad.Load(); n > 0 {
		st.Injected[FaultBadValue] = n
	}
	return st
}

// FormIDs lists the forms in creation order (form 0 first).
func (s *Server) FormIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.forms))
	for i, f := range s.forms {
		ids[i] = f.view.id
	}
	return ids
}

// Form returns the current metadata of a form, as GET /forms/{formId} shows it.
func (s *Server) Form(formID string) (forms.Form, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.byID[formID]
	if f == nil {
		return forms.Form{}, false
	}
	return f.view.copyMeta(), true
}

func (s *Server) form(formID string) (*formState, error) {
	f := s.byID[formID]
	if f == nil {
		return nil, fmt.Errorf("formsim: form %q: %w", formID, ErrNotFound)
	}
	return f, nil
}

// ExpectedIDs returns every finished, non-preview, non-deleted submission id
// of a form now, in (submissionTime, id-order) ascending order: exactly what
// paging the list endpoint without filters returns.
func (s *Server) ExpectedIDs(formID string) []string {
	return s.expected(formID, minTime, maxTime)
}

// ExpectedIDsBetween is ExpectedIDs restricted to submission times in
// [start, end).
func (s *Server) ExpectedIDsBetween(formID string, start, end time.Time) []string {
	return s.expected(formID, ceilMs(start), ceilMs(end))
}

func (s *Server) expected(formID string, lo, hi int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.byID[formID]
	if f == nil {
		return nil
	}
	const fin = classMask(1 << classFinished)
	out := make([]string, 0, f.rows.countRange(fin, lo, hi))
	f.rows.walk(fin, lo, hi, 0, func(r rec, _ *block) bool {
		out = append(out, s.ids.id(f.view.idx, r.ord))
		return true
	}, false)
	return out
}

// RenameQuestion changes a question's name; every submission shows the new
// name (the id stays).
func (s *Server) RenameQuestion(formID, questionID, newName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.form(formID)
	if err != nil {
		return err
	}
	i := f.view.question(questionID)
	if i < 0 {
		return fmt.Errorf("formsim: form %s has no question %q: %w", formID, questionID, ErrNotFound)
	}
	qs := slices.Clone(f.view.questions)
	qs[i] = qs[i].renamed(newName)
	f.view = f.view.with(qs)
	return nil
}

// AddQuestion appends a question. Submissions created from now on answer it
// (with generated values for Insert and arrivals); older ones answer null.
func (s *Server) AddQuestion(formID string, q forms.Field) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addQuestion(formID, q, false)
}

func (s *Server) addQuestion(formID string, q forms.Field, retroactive bool) error {
	f, err := s.form(formID)
	if err != nil {
		return err
	}
	if q.ID == "" || q.Type == "" {
		return fmt.Errorf("formsim: a question needs an id and a type, got %+v", q)
	}
	if f.view.question(q.ID) >= 0 {
		return fmt.Errorf("formsim: form %s already has a question %q", formID, q.ID)
	}
	since := f.nextOrd()
	if retroactive {
		since = 0
	}
	f.view = f.view.with(append(slices.Clip(f.view.questions), newQuestion(q.ID, q.Name, q.Type, since)))
	return nil
}

// ChangeQuestionType changes a question's type for submissions created from
// now on; older submissions keep the type and value shape they were answered
// with. The metadata shows the new type.
func (s *Server) ChangeQuestionType(formID, questionID, newType string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changeType(formID, questionID, newType, false)
}

func (s *Server) changeType(formID, questionID, newType string, retroactive bool) error {
	f, err := s.form(formID)
	if err != nil {
		return err
	}
	if newType == "" {
		return errors.New("formsim: the new question type is empty")
	}
	i := f.view.question(questionID)
	if i < 0 {
		return fmt.Errorf("formsim: form %s has no question %q: %w", formID, questionID, ErrNotFound)
	}
	from := f.nextOrd()
	if retroactive {
		from = 0
	}
	qs := slices.Clone(f.view.questions)
	qs[i] = qs[i].retyped(newType, from)
	f.view = f.view.with(qs)
	return nil
}

// Insert adds finished submissions at the given times (truncated to the
// millisecond) with generated answers, and delivers them to the form's
// webhooks. It returns their ids in order.
func (s *Server) Insert(formID string, times ...time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.form(formID)
	if err != nil {
		return nil, err
	}
	now := s.nowMs()
	ids := make([]string, len(times))
	refs := make([]rowRef, len(times))
	for i, t := range times {
		ms := floorMs(t)
		refs[i] = f.add(&createdRow{t: ms, updated: max(ms, now), generated: true})
		ids[i] = s.ids.id(f.view.idx, refs[i].r.ord)
	}
	s.stats.Created += int64(len(times))
	s.deliver(f, refs)
	return ids, nil
}

// Delete deletes a submission of any status, as the delete endpoint does.
func (s *Server) Delete(formID, submissionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.form(formID)
	if err != nil {
		return err
	}
	if !s.deleteRow(f, submissionID) {
		return fmt.Errorf("formsim: form %s has no submission %q: %w", formID, submissionID, ErrNotFound)
	}
	return nil
}

// Edit edits a submission as a person does in the product: its
// lastUpdatedAt moves to now, its submissionTime stays.
func (s *Server) Edit(formID, submissionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.form(formID)
	if err != nil {
		return err
	}
	ref, ok := s.lookup(f, submissionID)
	if !ok {
		return fmt.Errorf("formsim: form %s has no submission %q: %w", formID, submissionID, ErrNotFound)
	}
	f.edited[ref.r.ord] = max(s.nowMs(), ref.r.t)
	return nil
}

// deleteRow removes a submission by id; callers hold s.mu.
func (s *Server) deleteRow(f *formState, id string) bool {
	ref, ok := s.lookup(f, id)
	if !ok {
		return false
	}
	f.rows.remove(ref.r)
	s.journalDeleted(f, ref.r)
	delete(f.edited, ref.r.ord)
	s.stats.Deleted++
	return true
}

// lookup finds a live submission by id; callers hold s.mu.
func (s *Server) lookup(f *formState, id string) (rowRef, bool) {
	idx, ord, ok := s.ids.decode(id)
	if !ok || idx != f.view.idx {
		return rowRef{}, false
	}
	return f.lookup(ord)
}

func (s *Server) nowMs() int64 { return floorMs(s.cfg.Now()) }

// floorMs and ceilMs round a time to whole Unix milliseconds; they work for
// every year time.Parse accepts, unlike UnixNano.
func floorMs(t time.Time) int64 { return t.Unix()*1000 + int64(t.Nanosecond()/1e6) }

func ceilMs(t time.Time) int64 {
	ms := floorMs(t)
	if t.Nanosecond()%1e6 != 0 {
		ms++
	}
	return ms
}
