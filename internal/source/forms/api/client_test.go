package forms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestNewValidatesConfig(t *testing.T) {
	good := testConfig("https://api.example.com/v1/api")
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" means valid
	}{
		{"valid", func(*Config) {}, ""},
		{"defaults", func(c *Config) { *c = Config{BaseURL: c.BaseURL, APIKey: c.APIKey} }, ""},
		{"no base url", func(c *Config) { c.BaseURL = "" }, "BaseURL is required"},
		{"relative base url", func(c *Config) { c.BaseURL = "api.example.com/v1" }, "BaseURL (source.base_url) must start with https://"},
		{"ftp base url", func(c *Config) { c.BaseURL = "ftp://x/v1" }, "must start with https://"},
		{"credentials in base url", func(c *Config) { c.BaseURL = "https://u:p@x/v1" }, "must not carry credentials"},
		{"query in base url", func(c *Config) { c.BaseURL = "https://x/v1?a=b" }, "must not have a query"},
		{"no key", func(c *Config) { c.APIKey = "  " }, "APIKey is required"},
		{"key with newline inside", func(c *Config) { c.APIKey = "sk_a\nb" }, "APIKey contains whitespace"},
		{"negative rate", func(c *Config) { c.RateLimit = -1 }, "RateLimit must be a positive"},
		{"negative burst", func(c *Config) { c.Burst = -1 }, "Burst must be positive"},
		{"negative attempts", func(c *Config) { c.MaxAttempts = -1 }, "MaxAttempts must be at least 1"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "must not be negative"},
		{"min above max backoff", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, "MinBackoff (1s) exceeds MaxBackoff (1ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			_, err := New(cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: unexpected error %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("New: no error, want one containing %q", tt.want)
			case tt.want != "":
				mustContain(t, err.Error(), tt.want)
				if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "sk_a") {
					t.Errorf("error leaks the key: %v", err)
				}
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	c := newClient(t, Config{BaseURL: "https://API.example.com/v1/api/", APIKey: " key\n"})
	if c.BaseURL() != "https://api.example.com/v1/api" {
		t.Errorf("BaseURL = %q", c.BaseURL())
	}
	if c.auth != "Bearer key" {
		t.Errorf("key not trimmed")
	}
	got := []any{float64(c.limiter.Limit()), c.limiter.Burst(), c.maxAttempts, c.minBackoff, c.maxBackoff, c.timeout, c.maxBody}
	want := []any{float64(5), 1, 6, 500 * time.Millisecond, 30 * time.Second, 60 * time.Second, int64(64 << 20)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("defaults = %v, want %v", got, want)
	}
}

func TestListSubmissionsQuery(t *testing.T) {
	after := time.Date(2024, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	before := time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)
	zero := time.Time{}
	tests := []struct {
		name string
		p    ListParams
		want url.Values
	}{
		{"zero values send nothing", ListParams{AfterDate: &zero}, url.Values{}},
		{"everything", ListParams{
			Limit: 150, Offset: 300, AfterDate: &after, BeforeDate: &before, Status: StatusInProgress,
			IncludePreview: true, Sort: SortDesc, IncludeEditLink: true, Search: "a b&c",
		}, url.Values{
			"limit": {"150"}, "offset": {"300"}, "afterDate": {"2024-01-02T02:04:05.678Z"},
			"beforeDate": {"2024-02-01T00:00:00.000Z"}, "status": {"in_progress"}, "includePreview": {"true"},
			"sort": {"desc"}, "includeEditLink": {"true"}, "search": {"a b&c"},
		}},
		{"limit one", ListParams{Limit: 1, Status: StatusFinished, Sort: SortAsc}, url.Values{
			"limit": {"1"}, "status": {"finished"}, "sort": {"asc"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, ok(minimalPage))
			c := newClient(t, testConfig(s.base()))
			if _, err := c.ListSubmissions(context.Background(), "f1", tt.p); err != nil {
				t.Fatal(err)
			}
			r := s.requests()[0]
			got, err := url.ParseQuery(r.RawQuery)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("query = %v, want %v", got, tt.want)
			}
			if r.Method != http.MethodGet || r.Path != basePath+"/forms/f1/submissions" {
				t.Errorf("request = %s %s", r.Method, r.Path)
			}
			if r.Auth != "Bearer "+testKey {
				t.Errorf("Authorization = %q", r.Auth)
			}
		})
	}
}

func TestListSubmissionsRefusesBadParams(t *testing.T) {
	tests := []struct {
		name string
		p    ListParams
		want string
	}{
		{"limit above 150", ListParams{Limit: 151}, "limit 151 is outside 1..150"},
		{"negative limit", ListParams{Limit: -1}, "limit -1 is outside"},
		{"negative offset", ListParams{Offset: -5}, "offset -5 is negative"},
		{"unknown status", ListParams{Status: "done"}, `status "done"`},
		{"unknown sort", ListParams{Sort: "up"}, `sort "up"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, ok(minimalPage))
			c := newClient(t, testConfig(s.base()))
			_, err := c.ListSubmissions(context.Background(), "f1", tt.p)
			if err == nil {
				t.Fatal("no error")
			}
			mustContain(t, err.Error(), "list submissions of form f1", tt.want)
			if n := s.calls.Load(); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestPathSegmentsEscaped(t *testing.T) {
	s := newStub(t, ok(`{"submission":{"submissionId":"s","submissionTime":"2024-01-01T00:00:00Z"}}`))
	c := newClient(t, testConfig(s.base()))
	if _, err := c.GetSubmission(context.Background(), "a/b c", "x?y#z", true); err != nil {
		t.Fatal(err)
	}
	r := s.requests()[0]
	if want := basePath + "/forms/a%2Fb%20c/submissions/x%3Fy%23z"; r.Path != want {
		t.Errorf("path = %q, want %q", r.Path, want)
	}
	if r.RawQuery != "includeEditLink=true" {
		t.Errorf("query = %q", r.RawQuery)
	}
}

func TestEmptyIDsRefused(t *testing.T) {
	s := newStub(t, ok(`{}`))
	c := newClient(t, testConfig(s.base()))
	ctx := context.Background()
	calls := map[string]func() error{
		"GetForm":          func() error { _, err := c.GetForm(ctx, ""); return err },
		"ListSubmissions":  func() error { _, err := c.ListSubmissions(ctx, "", ListParams{}); return err },
		"GetSubmission":    func() error { _, err := c.GetSubmission(ctx, "f", "", false); return err },
		"CreateSubmission": func() error { _, err := c.CreateSubmissions(ctx, "", []NewSubmission{{}}); return err },
		"DeleteSubmission": func() error { return c.DeleteSubmission(ctx, "", "s") },
		"CreateWebhook":    func() error { _, err := c.CreateWebhook(ctx, "f", "not a url"); return err },
		"DeleteWebhook":    func() error { return c.DeleteWebhook(ctx, 0) },
	}
	for name, call := range calls {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// Transient answers are retried on reads; the attempt that succeeds ends it.
func TestReadsRetryTransientFailures(t *testing.T) {
	tests := []struct {
		name  string
		fail  step
		fails int
	}{
		{"429", status(429, `{"message":"slow down"}`), 2},
		{"500", status(500, ""), 1},
		{"502", status(502, "<html>bad gateway</html>"), 3},
		{"503", status(503, ""), 1},
		{"504", status(504, ""), 1},
		{"408", status(408, ""), 1},
		{"connection dropped", dropConnection, 2},
		{"truncated body", truncated(`{"responses":[`), 2},
		{"malformed body", ok(`{"responses":[}`), 1},
		{"empty 200", ok(""), 1},
		{"html 200", ok("<html>maintenance</html>"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := make([]step, 0, tt.fails+1)
			for range tt.fails {
				steps = append(steps, tt.fail)
			}
			s := newStub(t, append(steps, ok(minimalPage))...)
			var log attemptLog
			cfg := testConfig(s.base())
			cfg.Observer = &log
			c := newClient(t, cfg)
			page, err := c.ListSubmissions(context.Background(), "f1", ListParams{})
			if err != nil {
				t.Fatalf("ListSubmissions: %v", err)
			}
			if page.TotalResponses != 0 {
				t.Errorf("page = %+v", page)
			}
			if n := s.calls.Load(); n != int64(tt.fails+1) {
				t.Errorf("%d requests, want %d", n, tt.fails+1)
			}
			obs := log.all()
			if len(obs) != tt.fails+1 {
				t.Fatalf("%d observations, want %d", len(obs), tt.fails+1)
			}
			for i, o := range obs {
				if o.Attempt != i+1 || o.Endpoint != RouteListSubmissions {
					t.Errorf("observation %d = %+v", i, o)
				}
				if last := i == len(obs)-1; last != (o.Err == nil) {
					t.Errorf("observation %d: err = %v", i, o.Err)
				}
			}
		})
	}
}

// Failures retrying cannot fix are reported after exactly one request.
func TestNoRetryOnClientErrors(t *testing.T) {
	tests := []struct {
		status   int
		sentinel error
		want     string
	}{
		{400, ErrBadRequest, "the Forms API refused GET /forms/abc123/submissions (HTTP 400): afterDate is not a date"},
		{401, ErrUnauthorized, "rejected the API key (HTTP 401)"},
		{403, ErrUnauthorized, "rejected the API key (HTTP 403)"},
		{404, ErrNotFound, "form abc123 does not exist at"},
		{405, ErrBadRequest, "(HTTP 405)"},
		{422, ErrBadRequest, "(HTTP 422)"},
		{501, ErrUnavailable, "GET /forms/abc123/submissions failed (HTTP 501"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			s := newStub(t, status(tt.status, `{"message":"afterDate is not a date"}`))
			c := newClient(t, testConfig(s.base()))
			_, err := c.ListSubmissions(context.Background(), "abc123", ListParams{})
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want errors.Is %v", err, tt.sentinel)
			}
			mustContain(t, err.Error(), tt.want)
			if n := s.calls.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestTypedErrorMessages(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/forms/auth"):
			w.WriteHeader(401)
		case strings.HasSuffix(r.URL.Path, "/forms/forbidden"):
			w.WriteHeader(403)
		case strings.HasSuffix(r.URL.Path, "/forms/bad/submissions"):
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"message":"limit must be at most 150"}`))
		case strings.HasSuffix(r.URL.Path, "/webhook/delete"):
			w.WriteHeader(404)
		default:
			w.WriteHeader(404)
		}
	})
	c := newClient(t, testConfig(s.base()))
	ctx := context.Background()
	base := s.base()
	tests := []struct {
		name string
		call func() error
		as   any
		want string
	}{
		{"401", func() error { _, err := c.GetForm(ctx, "auth"); return err }, new(*AuthError),
			"the Forms API at " + base + " rejected the API key (HTTP 401): check source.api_key / FORMS_API_KEY and that the key belongs to this base URL (source.base_url)"},
		{"403", func() error { _, err := c.GetForm(ctx, "forbidden"); return err }, new(*AuthError),
			"the Forms API at " + base + " rejected the API key (HTTP 403): check source.api_key / FORMS_API_KEY and that the key belongs to this base URL (source.base_url)"},
		{"form 404", func() error { _, err := c.GetForm(ctx, "abc123"); return err }, new(*NotFoundError),
			"form abc123 does not exist at " + base + ": check the form id in forms[]"},
		{"submission 404", func() error { _, err := c.GetSubmission(ctx, "abc123", "s9", false); return err }, new(*NotFoundError),
			"submission s9 of form abc123 does not exist at " + base + ": it may have been deleted"},
		{"webhook 404", func() error { return c.DeleteWebhook(ctx, 42) }, new(*NotFoundError),
			"webhook 42 does not exist at " + base + ": it may have been deleted already"},
		{"forms 404", func() error { _, err := c.ListForms(ctx); return err }, new(*NotFoundError),
			"GET /forms does not exist at " + base + ": check source.base_url"},
		{"400", func() error { _, err := c.ListSubmissions(ctx, "bad", ListParams{}); return err }, new(*BadRequestError),
			"the Forms API refused GET /forms/bad/submissions (HTTP 400): limit must be at most 150"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.As(err, tt.as) {
				t.Errorf("errors.As(%T) false for %T", tt.as, err)
			}
			if err.Error() != tt.want {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	tests := []struct {
		name   string
		answer step
		check  func(t *testing.T, err error)
	}{
		{"503", status(503, `{"message":"down for maintenance"}`), func(t *testing.T, err error) {
			var ue *UnavailableError
			if !errors.As(err, &ue) || ue.Status != 503 || ue.Attempts != 4 || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %#v", err)
			}
			if want := "GET /forms/f1/submissions kept failing after 4 attempts (last: HTTP 503: down for maintenance)"; err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		}},
		{"429", status(429, ""), func(t *testing.T, err error) {
			mustContain(t, err.Error(), "after 4 attempts (last: HTTP 429)", "rate limited")
		}},
		{"always truncated", truncated(`{"responses":[{"submissionId":"a"`), func(t *testing.T, err error) {
			var de *DecodeError
			if !errors.As(err, &de) || de.Endpoint != "GET /forms/f1/submissions" || !errors.Is(err, ErrDecode) {
				t.Fatalf("err = %v", err)
			}
			mustContain(t, err.Error(), "decode response of GET /forms/f1/submissions", "unexpected EOF")
		}},
		{"always malformed", ok(`{"responses":[{"submissionId":"a",`), func(t *testing.T, err error) {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v", err)
			}
			mustContain(t, err.Error(), "decode response of GET /forms/f1/submissions")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, tt.answer)
			c := newClient(t, testConfig(s.base()))
			_, err := c.ListSubmissions(context.Background(), "f1", ListParams{})
			if err == nil {
				t.Fatal("no error")
			}
			tt.check(t, err)
			if n := s.calls.Load(); n != 4 {
				t.Errorf("%d requests, want MaxAttempts=4", n)
			}
		})
	}
}

// A body of the wrong shape is what the service sends, not damage in
// transit: it is reported at once, naming the endpoint and the field.
func TestDecodeErrorsNotRetried(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"bad timestamp", `{"responses":[{"submissionId":"s1","submissionTime":"yesterday"}],"totalResponses":1,"pageCount":1}`,
			[]string{"decode response of GET /forms/f1/submissions", `responses[0] (submission "s1"): submissionTime: unrecognised timestamp "yesterday"`}},
		{"wrong type", `{"responses":{"a":1},"totalResponses":1}`, []string{"GET /forms/f1/submissions", "responses"}},
		{"error object with 200", `{"message":"oops"}`, []string{"GET /forms/f1/submissions", "responses is missing"}},
		{"missing total", `{"responses":[]}`, []string{"totalResponses is missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, ok(tt.body))
			c := newClient(t, testConfig(s.base()))
			_, err := c.ListSubmissions(context.Background(), "f1", ListParams{})
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want DecodeError", err)
			}
			mustContain(t, err.Error(), tt.want...)
			if n := s.calls.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestOversizedBody(t *testing.T) {
	big := `{"responses":[],"totalResponses":0,"pageCount":0,"pad":"` + strings.Repeat("x", 200) + `"}`
	s := newStub(t, ok(big))
	cfg := testConfig(s.base())
	cfg.MaxBodyBytes = 100
	c := newClient(t, cfg)
	_, err := c.ListSubmissions(context.Background(), "f1", ListParams{})
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v", err)
	}
	if want := "response of GET /forms/f1/submissions exceeds the 100-byte cap (forms client MaxBodyBytes)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// Exactly at the cap is fine.
	s2 := newStub(t, ok(minimalPage))
	cfg2 := testConfig(s2.base())
	cfg2.MaxBodyBytes = int64(len(minimalPage))
	if _, err := newClient(t, cfg2).ListSubmissions(context.Background(), "f1", ListParams{}); err != nil {
		t.Errorf("body of exactly MaxBodyBytes: %v", err)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"zero", "0", 0},
		{"http date", now.Add(12 * time.Second).Format(http.TimeFormat), 12 * time.Second},
		{"date in the past", now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"capped at MaxBackoff", "3600", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, status(429, "", "Retry-After", tt.retryAfter), ok(minimalPage))
			cfg := testConfig(s.base())
			cfg.MaxBackoff = time.Minute
			c := newClient(t, cfg)
			var sl sleeper
			c.sleep = sl.sleep
			c.now = func() time.Time { return now }
			if _, err := c.ListSubmissions(context.Background(), "f1", ListParams{}); err != nil {
				t.Fatal(err)
			}
			if got := sl.recorded(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("delays = %v, want [%s]", got, tt.want)
			}
		})
	}
}

func TestBackoffFullJitterBounds(t *testing.T) {
	s := newStub(t, status(503, ""))
	cfg := testConfig(s.base())
	cfg.MinBackoff, cfg.MaxBackoff, cfg.MaxAttempts = 100*time.Millisecond, time.Second, 8
	c := newClient(t, cfg)
	var sl sleeper
	c.sleep = sl.sleep
	// Extreme jitter draws, then the real source.
	for _, jitter := range []func(int64) int64{
		func(int64) int64 { return 0 },
		func(n int64) int64 { return n - 1 },
		c.jitter,
	} {
		c.jitter = jitter
		sl = sleeper{}
		if _, err := c.ListSubmissions(context.Background(), "f1", ListParams{}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
		delays := sl.recorded()
		if len(delays) != 7 {
			t.Fatalf("%d sleeps, want 7", len(delays))
		}
		for i, d := range delays {
			ceil := min(100*time.Millisecond<<(i+1), time.Second)
			if d < 100*time.Millisecond || d > ceil {
				t.Errorf("delay %d = %s, want within [100ms, %s]", i+1, d, ceil)
			}
		}
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	arrived := make(chan struct{}, 10)
	s := newStub(t, func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		w.WriteHeader(503)
	})
	cfg := testConfig(s.base())
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	c := newClient(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	var err error
	within(t, 10*time.Second, func() { _, err = c.ListSubmissions(ctx, "f1", ListParams{}) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	mustContain(t, err.Error(), "GET /forms/f1/submissions")
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestCancelDuringRequest(t *testing.T) {
	arrived := make(chan struct{}, 1)
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) { arrived <- struct{}{}; hang(w, r) })
	c := newClient(t, testConfig(s.base()))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	var err error
	within(t, 10*time.Second, func() { _, err = c.GetForm(ctx, "f1") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1 (no retry after cancellation)", n)
	}
}

func TestCancelDuringRateLimitWait(t *testing.T) {
	s := newStub(t, ok(`{"id":"f1","name":"F","questions":[]}`))
	cfg := testConfig(s.base())
	// A new client's limiter starts empty (httpapi.NewLimiter): its first
	// token comes after 1 s, the next 1 s later.
	cfg.RateLimit, cfg.Burst = 1, 1
	c := newClient(t, cfg)
	if _, err := c.GetForm(context.Background(), "f1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	var err error
	within(t, 10*time.Second, func() { _, err = c.GetForm(ctx, "f1") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	mustContain(t, err.Error(), "rate limiter")

	// A deadline the limiter cannot meet fails at once, as a deadline error.
	dctx, dcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer dcancel()
	_, err = c.GetForm(dctx, "f1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestPerAttemptTimeoutRetried(t *testing.T) {
	s := newStub(t, hang, ok(`{"id":"f1","name":"F","questions":[]}`))
	cfg := testConfig(s.base())
	cfg.Timeout = 50 * time.Millisecond
	c := newClient(t, cfg)
	f, err := c.GetForm(context.Background(), "f1")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "f1" || s.calls.Load() != 2 {
		t.Errorf("form %+v after %d requests", f, s.calls.Load())
	}
}

func TestCreateSubmissions(t *testing.T) {
	st := time.Date(2024, 3, 1, 10, 0, 0, 123_456_789, time.FixedZone("X", -2*3600))
	created := `{"submissions":[{"submissionId":"n1","submissionTime":"2024-03-01T12:00:00.123Z","questions":[{"id":"q1","name":"Name","type":"ShortAnswer","value":"Ada"}]}]}`
	s := newStub(t, ok(created))
	c := newClient(t, testConfig(s.base()))
	subs := []NewSubmission{{
		Questions:      []NewAnswer{{ID: "q1", Value: json.RawMessage(`"Ada"`)}, {ID: "q2"}},
		SubmissionTime: &st,
		URLParameters:  []URLParameter{{ID: "u", Name: "utm", Value: "x"}},
	}}
	got, err := c.CreateSubmissions(context.Background(), "f 1", subs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SubmissionID != "n1" || string(got[0].Questions[0].Value) != `"Ada"` {
		t.Errorf("created = %+v", got)
	}
	r := s.requests()[0]
	if r.Method != http.MethodPost || r.Path != basePath+"/forms/f%201/submissions" || r.ContentType != "application/json" {
		t.Errorf("request %s %s %s", r.Method, r.Path, r.ContentType)
	}
	want := `{"submissions":[{"questions":[{"id":"q1","value":"Ada"},{"id":"q2","value":null}],"urlParameters":[{"id":"u","name":"utm","value":"x"}],"submissionTime":"2024-03-01T12:00:00.123Z"}]}`
	if r.Body != want {
		t.Errorf("body\n got %s\nwant %s", r.Body, want)
	}
}

func TestCreateSubmissionsBatchLimit(t *testing.T) {
	s := newStub(t, ok(`{"submissions":[]}`))
	c := newClient(t, testConfig(s.base()))
	_, err := c.CreateSubmissions(context.Background(), "f1", make([]NewSubmission, MaxCreateBatch+1))
	if err == nil {
		t.Fatal("11 submissions accepted")
	}
	mustContain(t, err.Error(), "create submissions in form f1: 11 submissions exceed the 10 one call may carry")
	if got, err := c.CreateSubmissions(context.Background(), "f1", nil); err != nil || got != nil {
		t.Errorf("empty batch: %v, %v", got, err)
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
	if _, err := c.CreateSubmissions(context.Background(), "f1", make([]NewSubmission, MaxCreateBatch)); err != nil {
		t.Errorf("10 submissions: %v", err)
	}
}

// Writes are retried only when the request surely was not processed.
func TestWriteRetryPolicy(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		timeout   time.Duration
		requests  int64
		wantErr   bool
		uncertain bool
	}{
		{"429 then ok", []step{status(429, ""), ok(`{"submissions":[]}`)}, 0, 2, false, false},
		{"503 then ok", []step{status(503, ""), ok(`{"submissions":[]}`)}, 0, 2, false, false},
		{"500 not retried", []step{status(500, ""), ok(`{"submissions":[]}`)}, 0, 1, true, true},
		{"502 not retried", []step{status(502, ""), ok(`{"submissions":[]}`)}, 0, 1, true, true},
		{"504 not retried", []step{status(504, ""), ok(`{"submissions":[]}`)}, 0, 1, true, true},
		{"timeout not retried", []step{hang, ok(`{"submissions":[]}`)}, 50 * time.Millisecond, 1, true, true},
		{"dropped connection not retried", []step{dropConnection, ok(`{"submissions":[]}`)}, 0, 1, true, true},
		{"truncated answer not retried", []step{truncated(`{"submissions":[`), ok(`{"submissions":[]}`)}, 0, 1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, tt.steps...)
			cfg := testConfig(s.base())
			if tt.timeout > 0 {
				cfg.Timeout = tt.timeout
			}
			c := newClient(t, cfg)
			_, err := c.CreateSubmissions(context.Background(), "f1", []NewSubmission{{}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if n := s.calls.Load(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			var ue *UnavailableError
			if got := errors.As(err, &ue) && ue.Uncertain; got != tt.uncertain {
				t.Errorf("uncertain = %v, want %v (err %v)", got, tt.uncertain, err)
			}
			if tt.uncertain {
				mustContain(t, err.Error(), "may have been applied")
			}
		})
	}
}

// A connection that never opened is retried even for a create: nothing can
// have reached the server.
func TestWriteRetriedWhenConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var log attemptLog
	cfg := testConfig("http://" + addr + basePath)
	cfg.Observer = &log
	c := newClient(t, cfg)
	_, err = c.CreateSubmissions(context.Background(), "f1", []NewSubmission{{}})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Status != 0 || ue.Uncertain || ue.Attempts != 4 {
		t.Fatalf("err = %#v", err)
	}
	obs := log.all()
	if len(obs) != 4 || obs[0].Status != 0 || obs[0].Endpoint != RouteCreateSubmission {
		t.Errorf("observations = %+v", obs)
	}
}

func TestDeleteSubmission(t *testing.T) {
	s := newStub(t, status(200, `{}`))
	c := newClient(t, testConfig(s.base()))
	if err := c.DeleteSubmission(context.Background(), "f1", "s/1"); err != nil {
		t.Fatal(err)
	}
	if r := s.requests()[0]; r.Method != http.MethodDelete || r.Path != basePath+"/forms/f1/submissions/s%2F1" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
}

func TestWebhooks(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		for _, answer := range []string{`{"id":12345}`, `{"id":"12345"}`} {
			s := newStub(t, ok(answer))
			c := newClient(t, testConfig(s.base()))
			id, err := c.CreateWebhook(context.Background(), "f1", "https://hooks.example.com/in?secret=abc")
			if err != nil || id != 12345 {
				t.Fatalf("CreateWebhook = %d, %v", id, err)
			}
			r := s.requests()[0]
			if r.Method != http.MethodPost || r.Path != basePath+"/webhook/create" ||
				r.Body != `{"formId":"f1","url":"https://hooks.example.com/in?secret=abc"}` {
				t.Errorf("request %s %s %s", r.Method, r.Path, r.Body)
			}
		}
	})
	t.Run("create answer without id", func(t *testing.T) {
		s := newStub(t, ok(`{}`))
		_, err := newClient(t, testConfig(s.base())).CreateWebhook(context.Background(), "f1", "https://h.example.com/")
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "h.example.com") {
			t.Errorf("error shows the webhook url: %v", err)
		}
	})
	t.Run("delete sends the id as a string", func(t *testing.T) {
		s := newStub(t, ok(`{}`))
		if err := newClient(t, testConfig(s.base())).DeleteWebhook(context.Background(), 77); err != nil {
			t.Fatal(err)
		}
		if r := s.requests(); len(r) != 1 || r[0].Path != basePath+"/webhook/delete" || r[0].Body != `{"webhookId":"77"}` {
			t.Errorf("requests %+v", r)
		}
	})
	t.Run("delete falls back to a number on 400", func(t *testing.T) {
		s := newStub(t, status(400, `{"message":"webhookId must be a number"}`), ok(`{}`))
		if err := newClient(t, testConfig(s.base())).DeleteWebhook(context.Background(), 77); err != nil {
			t.Fatal(err)
		}
		r := s.requests()
		if len(r) != 2 || r[0].Body != `{"webhookId":"77"}` || r[1].Body != `{"webhookId":77}` {
			t.Errorf("requests %+v", r)
		}
	})
}

func TestGetSubmissionShapes(t *testing.T) {
	sub := `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00.000Z","editLink":"https://e"}`
	for name, body := range map[string]string{
		"wrapped": `{"submission":` + sub + `}`,
		"bare":    sub,
	} {
		t.Run(name, func(t *testing.T) {
			s := newStub(t, ok(body))
			got, err := newClient(t, testConfig(s.base())).GetSubmission(context.Background(), "f1", "s1", true)
			if err != nil {
				t.Fatal(err)
			}
			if got.SubmissionID != "s1" || got.EditLink != "https://e" || !got.SubmissionTime.Equal(time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("got %+v", got)
			}
		})
	}
	s := newStub(t, ok(`{"other":1}`))
	if _, err := newClient(t, testConfig(s.base())).GetSubmission(context.Background(), "f1", "s1", false); !errors.Is(err, ErrDecode) {
		t.Errorf("err = %v, want a DecodeError", err)
	}
}

func TestListFormsAndGetForm(t *testing.T) {
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case basePath + "/forms":
			_, _ = w.Write([]byte(`[{"formId":"a","name":"A","tags":["x"]},{"formId":"b","name":"B","tags":null,"extra":1}]`))
		case basePath + "/forms/a":
			_, _ = w.Write([]byte(`{"id":"a","name":"A","questions":[{"id":"q","name":"Q","type":"ShortAnswer"}],"quiz":{"enabled":true},"payments":null,"novel":{}}`))
		default:
			w.WriteHeader(404)
		}
	})
	c := newClient(t, testConfig(s.base()))
	forms, err := c.ListForms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(forms) != 2 || forms[0].FormID != "a" || forms[0].Tags[0] != "x" || forms[1].Name != "B" {
		t.Errorf("forms = %+v", forms)
	}
	f, err := c.GetForm(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "a" || len(f.Questions) != 1 || f.Quiz == nil || !f.Quiz.Enabled {
		t.Errorf("form = %+v", f)
	}
}

func TestSharedLimiters(t *testing.T) {
	reg := NewLimiters()
	mk := func(base, key string, rl float64, burst int) *Client {
		return newClient(t, Config{BaseURL: base, APIKey: key, RateLimit: rl, Burst: burst, Limiters: reg})
	}
	a := mk("https://api.example.com/v1/api", "k1", 5, 2)
	b := mk("https://api.example.com/v1/api/", "k1", 10, 3) // same key, same deployment
	other := mk("https://api.example.com/v1/api", "k2", 5, 1)
	eu := mk("https://eu-api.example.com/v1/api", "k1", 5, 1)
	if a.limiter != b.limiter {
		t.Error("two clients of one key do not share a limiter")
	}
	if a.limiter == other.limiter || a.limiter == eu.limiter {
		t.Error("different keys or deployments share a limiter")
	}
	if a.limiter.Limit() != 5 || a.limiter.Burst() != 2 {
		t.Errorf("shared limiter = %v/%d, want the stricter 5/2", a.limiter.Limit(), a.limiter.Burst())
	}
	mk("https://api.example.com/v1/api", "k1", 1, 1)
	if a.limiter.Limit() != 1 || a.limiter.Burst() != 1 {
		t.Errorf("a stricter client did not tighten the shared limiter: %v/%d", a.limiter.Limit(), a.limiter.Burst())
	}
	var zero Limiters // the zero value works too
	if zero.get("b", "k", 1, 1) != zero.get("b", "k", 1, 1) {
		t.Error("zero Limiters does not share")
	}
}

// A retry draws from the rate limiter like a first attempt: the new
// client's limiter gives its first token after 1 s and the next 1 s later,
// past the deadline, so the retry cannot start before the deadline and the
// call fails without a second request.
func TestRateLimiterGatesRetries(t *testing.T) {
	s := newStub(t, status(503, ""), ok(minimalPage))
	cfg := testConfig(s.base())
	cfg.RateLimit, cfg.Burst = 1, 1
	c := newClient(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := c.ListSubmissions(ctx, "f1", ListParams{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the limiter to refuse the retry", err)
	}
	mustContain(t, err.Error(), "rate limit")
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
