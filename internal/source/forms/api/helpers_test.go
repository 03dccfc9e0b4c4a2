package forms

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKey is recognisable so that leak tests can look for it.
const testKey = "sk_test_SECRET_123"

// basePath mirrors the service: the base URL carries a path.
const basePath = "/v1/api"

// stub is an httptest server answering each request with the next step (the
// last step repeats) and recording what it received.
type stub struct {
	srv   *httptest.Server
	calls atomic.Int64

	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	Method, Path, RawQuery, Auth, ContentType string
	Body                                      string
}

type step func(w http.ResponseWriter, r *http.Request)

func newStub(t *testing.T, steps ...step) *stub {
	t.Helper()
	s := &stub{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recorded{
			Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(body),
		})
		s.mu.Unlock()
		i := min(int(n)-1, len(steps)-1)
		steps[i](w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stub) base() string { return s.srv.URL + basePath }

func (s *stub) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func status(code int, body string, headers ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func ok(body string) step { return status(http.StatusOK, body) }

// truncated declares a longer body than it sends, so the client's read ends
// with an unexpected EOF.
func truncated(body string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)+100))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
	}
}

// dropConnection closes the connection without answering: the client sees
// an EOF or a reset.
func dropConnection(w http.ResponseWriter, _ *http.Request) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	} // else the empty 200 fails the test's expectations loudly enough
}

// hang answers only once the client has gone away.
func hang(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
}

// echoAuth puts the request's Authorization header into an error body, as a
// careless proxy might.
func echoAuth(code int) step {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"message": "bad header %s"}`, r.Header.Get("Authorization"))
	}
}

// sleeper replaces the client's backoff sleep: it records the delays and
// returns at once (or with ctx's error).
type sleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// attemptLog is an Observer recording every attempt.
type attemptLog struct {
	mu  sync.Mutex
	obs []observed
}

type observed struct {
	Endpoint string
	Status   int
	Attempt  int
	Err      error
}

func (a *attemptLog) ObserveRequest(endpoint string, status, attempt int, _ time.Duration, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.obs = append(a.obs, observed{endpoint, status, attempt, err})
}

func (a *attemptLog) all() []observed {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]observed(nil), a.obs...)
}

// testConfig is fast: tiny backoff, a generous rate limit, few attempts.
func testConfig(base string) Config {
	return Config{
		BaseURL:     base,
		APIKey:      testKey,
		RateLimit:   1000,
		Burst:       100,
		MaxAttempts: 4,
		MinBackoff:  time.Millisecond,
		MaxBackoff:  4 * time.Millisecond,
		Timeout:     5 * time.Second,
	}
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// within fails the test if f does not return in time: a liveness guard for
// cancellation tests, not a speed assertion.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("call did not return within %s", d)
	}
}

const minimalPage = `{"responses":[],"totalResponses":0,"pageCount":0}`

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not contain %q", s, sub)
		}
	}
}
