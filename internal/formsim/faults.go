package formsim

import (
	"maps"
	"time"

	"github.com/syncd-dev/syncd/internal/simhook"
)

// Faults are the knobs of fault injection; the zero value injects nothing.
// Every random decision comes from the server's seeded source, so a run with
// the same seed, faults and request sequence fails the same way.
type Faults struct {
	// Answers given instead of the real one, decided when a request arrives
	// and before it has any effect (a create that is answered 503 created
	// nothing).
	ServerErrorRate float64 // share of requests answered 500, 502 or 503
	// ErrorRate is ServerErrorRate under its first name; the larger applies.
	ErrorRate           float64
	RateLimitRate       float64 // share of requests answered 429
	RateLimitBurstEvery int     // every Nth request starts a run of 429s...
	RateLimitBurstLen   int     // ...this long (default 3)
	// RetryAfter, when > 0, adds Retry-After (whole seconds, rounded up) to
	// every 429, injected or from the rate limiter. The service documents no
	// such header, so it is off by default.
	RetryAfter time.Duration

	// Delays, before the answer is written; both end early when the client
	// goes away or the server is closed.
	Latency   time.Duration // added to every admitted request
	SlowRate  float64       // share of requests delayed by a further SlowDelay
	SlowDelay time.Duration

	// Broken bodies on successful GET answers (reads only, so a client may
	// retry them safely): status 200, then JSON cut short at a random byte
	// (Content-Length matches the cut body), or something that is not JSON.
	TruncateRate  float64
	MalformedRate float64

	// BadValueRate is the share of generated answers whose value does not
	// fit the question's type (a string in a NumberInput, an object in a
	// MultiSelect). Decided per row and question, so a row reads the same on
	// every request while the knob holds still.
	BadValueRate float64

	// MetadataChurnEvery: every Nth metadata read of a form (after its
	// first) changes the form first, in turn: a question renamed, a question
	// added, a question changing type, a question of an unknown type
	// ("FancyNewWidget"). Unlike AddQuestion and ChangeQuestionType, churn
	// rewrites history: every row, old ones included, answers the new
	// question and uses the new type, so the next page shows the change.
	MetadataChurnEvery int

	// Changes while a client pages, applied after each submissions page is
	// served (so the next page sees them).
	ArrivalsPerPage  int // new finished submissions at submissionTime = now
	BackdatedPerPage int // imports with submissionTime uniform in [Start, now)
	EditsPerPage     int // lastUpdatedAt of random finished submissions moves to now
	DeletesPerPage   int // random finished submissions deleted
}

// FaultKind names an injected fault in Stats.Injected.
type FaultKind string

const (
	FaultServerError FaultKind = "server_error" // 500/502/503 answer
	FaultRateLimit   FaultKind = "rate_limit"   // injected 429 (not the limiter's)
	FaultSlow        FaultKind = "slow"
	FaultTruncated   FaultKind = "truncated"
	FaultMalformed   FaultKind = "malformed"
	FaultBadValue    FaultKind = "bad_value" // one answer that does not fit its type
	FaultChurn       FaultKind = "metadata_churn"
	FaultArrival     FaultKind = "arrival"
	FaultBackdated   FaultKind = "backdated"
	FaultEdit        FaultKind = "edit"
	FaultDelete      FaultKind = "delete"
)

// Stats are the server's counters, so tests can assert behaviour without
// measuring time.
type Stats struct {
	Requests          int64
	RateLimited       int64 // 429 answers from the rate limiter
	InjectedErrors    int64 // injected failed answers: 5xx, 429, truncated and malformed bodies
	Injected          map[FaultKind]int64
	ByStatus          map[int]int64 // every answer by status code
	PagesServed       int64         // submissions list pages answered 200
	SubmissionsServed int64         // submissions in those pages
	MetadataReads     int64
	Created           int64 // submissions added: create calls, Insert, arrival and back-dated faults
	Deleted           int64 // submissions deleted: delete calls, Delete, delete faults
	WebhooksDelivered int64 // delivery attempts answered 2xx (Webhooks.Delivered)
	WebhookFailures   int64 // attempts that failed or were answered otherwise (Webhooks.Failed)
	// Webhooks counts deliveries and their injected faults.
	Webhooks simhook.Stats
}

func (s Stats) clone() Stats {
	s.Injected = maps.Clone(s.Injected)
	s.ByStatus = maps.Clone(s.ByStatus)
	return s
}

// decision is what fault injection chose for one admitted request.
type decision struct {
	status    int // injected answer, 0 for none
	delay     time.Duration
	truncate  bool
	malformed bool
}

// decide draws the faults of one request; callers hold s.mu.
func (s *Server) decide(f *Faults, read bool) decision {
	var d decision
	s.admitted++
	d.delay = f.Latency
	if f.SlowRate > 0 && s.rng.Float64() < f.SlowRate {
		d.delay += f.SlowDelay
		s.inject(FaultSlow, false)
	}
	switch {
	case s.burstLeft > 0:
		s.burstLeft--
		d.status = 429
	case f.RateLimitBurstEvery > 0 && s.admitted%int64(f.RateLimitBurstEvery) == 0:
		n := f.RateLimitBurstLen
		if n <= 0 {
			n = 3
		}
		s.burstLeft = n - 1
		d.status = 429
	case f.RateLimitRate > 0 && s.rng.Float64() < f.RateLimitRate:
		d.status = 429
	case max(f.ServerErrorRate, f.ErrorRate) > 0 && s.rng.Float64() < max(f.ServerErrorRate, f.ErrorRate):
		d.status = [...]int{500, 502, 503}[s.rng.IntN(3)]
	}
	switch d.status {
	case 429:
		s.inject(FaultRateLimit, true)
	case 0:
	default:
		s.inject(FaultServerError, true)
	}
	if d.status == 0 && read {
		switch {
		case f.TruncateRate > 0 && s.rng.Float64() < f.TruncateRate:
			d.truncate = true
		case f.MalformedRate > 0 && s.rng.Float64() < f.MalformedRate:
			d.malformed = true
		}
	}
	return d
}

// inject counts one fault; failed says whether it is an injected error
// answer. Callers hold s.mu.
func (s *Server) inject(k FaultKind, failed bool) {
	s.stats.Injected[k]++
	if failed {
		s.stats.InjectedErrors++
	}
}
