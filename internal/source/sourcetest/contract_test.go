package sourcetest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/schedsim"
	srcforms "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/source/sourcetest"
)

// TestSourceContract runs the contract over every source's simulator.
func TestSourceContract(t *testing.T) {
	t.Run("forms", func(t *testing.T) { sourcetest.Run(t, formsHarness(breakage{})) })
	t.Run("scheduling", func(t *testing.T) { sourcetest.Run(t, schedHarness()) })
}

// seed is a simulator's seed, printed.
func seed(t *testing.T) int64 {
	s := time.Now().UnixNano() % 1_000_000_007
	t.Logf("simulator seed %d", s)
	return s
}

const apiKey = "sourcetest-key"

// formsService is one form of formsim, served on loopback and read
// through the Forms API client (internal/source/forms/api).
type formsService struct {
	sim    *formsim.Server
	client srcforms.API
	form   string
	now    func() time.Time
	mu     sync.Mutex
	edits  map[string]time.Time
	wrap   func(*srcforms.Stream) poller.Stream
}

// breakage is how the suite's own tests break the forms stream on
// purpose: the client it reads through, or the stream itself.
type breakage struct {
	api    func(srcforms.API) srcforms.API
	stream func(*srcforms.Stream) poller.Stream
}

// formsHarness starts formsim, read through a stream broken by br.
func formsHarness(br breakage) sourcetest.Harness {
	return sourcetest.Harness{MaxRowsPerBatch: 40, Start: func(t *testing.T, now func() time.Time) sourcetest.Service {
		sim, err := formsim.New(formsim.Config{APIKey: apiKey, Seed: seed(t), Forms: 1, Submissions: 200,
			Start: sourcetest.T0.Add(-10 * 24 * time.Hour), End: sourcetest.T0.Add(-24 * time.Hour), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		sim.EnableJournal()
		ts := httptest.NewServer(sim)
		t.Cleanup(func() { ts.Close(); sim.Close() })
		c, err := forms.New(forms.Config{BaseURL: ts.URL + formsim.BasePath, APIKey: apiKey, RateLimit: 10000, Burst: 1000,
			MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var api srcforms.API = c
		if br.api != nil {
			api = br.api(api)
		}
		return &formsService{sim: sim, client: api, form: sim.FormIDs()[0], now: now, edits: map[string]time.Time{}, wrap: br.stream}
	}}
}

func (f *formsService) Stream(*testing.T) poller.Stream {
	// Small pages: every window takes several.
	s := srcforms.NewStream(f.client, f.form, "", srcforms.StreamOptions{PageSize: 13})
	if f.wrap != nil {
		return f.wrap(s)
	}
	return s
}

func (f *formsService) Records(t *testing.T) []sourcetest.Record {
	j, ok := f.sim.Journal(f.form)
	if !ok {
		t.Fatal("formsim's journal is off")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sourcetest.Record
	for _, s := range j.Subs {
		if s.Deleted == 0 {
			out = append(out, sourcetest.Record{Key: s.ID, Time: s.Time, Version: f.edits[s.ID]})
		}
	}
	return out
}

func (f *formsService) Add(t *testing.T, at time.Time) string {
	ids, err := f.sim.Insert(f.form, at)
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

func (f *formsService) Edit(t *testing.T, key string) bool {
	if err := f.sim.Edit(f.form, key); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edits[key] = f.now().UTC().Truncate(time.Millisecond)
	return true
}

func (f *formsService) Delete(t *testing.T, key string) bool {
	if err := f.sim.Delete(f.form, key); err != nil {
		t.Fatal(err)
	}
	return true
}

// schedService is schedsim, read through the bookings client signed in
// with an OAuth token source.
type schedService struct {
	sim     *schedsim.Server
	client  *scheduling.Client
	counter *scheduling.Counter
}

func schedHarness() sourcetest.Harness {
	return sourcetest.Harness{MaxRowsPerBatch: 40, CountsLow: true, Start: func(t *testing.T, now func() time.Time) sourcetest.Service {
		sim := schedsim.New(schedsim.Config{Seed: seed(t), Bookings: 160, Now: now})
		ts := httptest.NewServer(sim)
		t.Cleanup(ts.Close)
		counter := &scheduling.Counter{}
		c, err := scheduling.New(scheduling.Config{BaseURL: ts.URL, Tokens: signIn(t, sim, ts.URL), RateLimit: 10000, Burst: 1000,
			MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 8, Observer: counter})
		if err != nil {
			t.Fatal(err)
		}
		return &schedService{sim: sim, client: c, counter: counter}
	}}
}

// signIn signs in as the simulator's confidential client (the authorize
// page's redirect read directly, no browser) and returns the token source.
func signIn(t *testing.T, sim *schedsim.Server, base string) *oauth.TokenSource {
	t.Helper()
	var sc schedsim.Client
	for _, c := range sim.Clients() {
		if c.ID == "sim-client" {
			sc = c
		}
	}
	oc, err := oauth.NewClient(oauth.Config{
		AuthURL: base + schedsim.PathAuthorize, TokenURL: base + schedsim.PathToken,
		ClientID: sc.ID, ClientSecret: sc.Secrets[0], RedirectURI: "http://127.0.0.1:9/cb",
		Scopes:     []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead},
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := oc.NewAuthRequest()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(ar.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, err := oauth.ParseRedirect(resp.Header.Get("Location"), ar.State)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oc.Exchange(context.Background(), code, ar.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	return oauth.NewTokenSource(oc, &tokens{tok: &tok}, oauth.SourceOptions{})
}

// tokens keeps the signed-in token in memory.
type tokens struct {
	mu  sync.Mutex
	tok *oauth.Token
}

func (m *tokens) Load(context.Context) (oauth.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok == nil {
		return oauth.Token{}, oauth.ErrNoToken
	}
	return *m.tok, nil
}

func (m *tokens) Save(_ context.Context, t oauth.Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tok = &t
	return nil
}

func (s *schedService) Stream(*testing.T) poller.Stream {
	return scheduling.NewStream(s.client, "bookings", nil, s.counter)
}

func (s *schedService) Records(*testing.T) []sourcetest.Record {
	var out []sourcetest.Record
	for _, j := range s.sim.Journal() {
		out = append(out, sourcetest.Record{Key: j.UID, Time: j.VersionTime, Version: j.VersionTime})
	}
	return out
}

// Add creates a booking now: a booking's time is its version time.
func (s *schedService) Add(*testing.T, time.Time) string { return s.sim.Create() }

// Edit cancels the booking: a new version at now.
func (s *schedService) Edit(_ *testing.T, key string) bool { return s.sim.Cancel(key, "sourcetest") }

// Delete: bookings are never deleted, only cancelled (a version).
func (s *schedService) Delete(*testing.T, string) bool { return false }
