package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/time/rate"
)

const secret = "tok_SECRET_42"

// server answers the n-th request (1-based) with steps[min(n, len)-1].
func server(t *testing.T, steps ...http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1))
		steps[min(i, len(steps))-1](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func answer(code int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// judgeStatus is a minimal judge: 2xx succeeds, transient statuses retry.
func judgeStatus(c **Client) Judge {
	return func(r *Request, res *Response, attempt int) Verdict {
		switch {
		case res.Err != nil:
			return Verdict{Err: res.Err, Retry: true}
		case res.TooLarge:
			return Verdict{Err: errors.New("too large")}
		case res.Status >= 200 && res.Status < 300:
			return Verdict{}
		case TransientStatus(res.Status):
			v := Verdict{Err: fmt.Errorf("HTTP %d: %s", res.Status, ServerMessage(res.Body, secret)), Retry: true}
			v.RetryAfter, v.HasRetryAfter = (*c).RetryAfter(res.Header)
			return v
		default:
			return Verdict{Err: fmt.Errorf("HTTP %d: %s", res.Status, ServerMessage(res.Body, secret))}
		}
	}
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

type obsLog struct {
	mu  sync.Mutex
	got []string
}

func (o *obsLog) ObserveRequest(ep string, status, attempt int, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, fmt.Sprintf("%s %d #%d err=%v", ep, status, attempt, err != nil))
}

func newTestClient(t *testing.T, base string, mutate func(*Config)) (*Client, *sleeps, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	var sl sleeps
	cfg := Config{
		Name: "test client", BaseURL: base, Auth: Bearer(secret),
		RateLimit: 1000, Burst: 100, MaxAttempts: 4,
		MinBackoff: time.Millisecond, MaxBackoff: time.Minute, Timeout: 5 * time.Second,
		Logger: zap.New(core), Sleep: sl.sleep,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, &sl, logs
}

func TestRetriesTransientThenSucceeds(t *testing.T) {
	var auths []string
	var mu sync.Mutex
	record := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auths = append(auths, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Version"))
			mu.Unlock()
			h(w, r)
		}
	}
	srv, calls := server(t, record(answer(503, "")), record(answer(429, "", "Retry-After", "3")), record(answer(200, "{}")))
	var obs obsLog
	var c *Client
	c, sl, _ := newTestClient(t, srv.URL, func(cfg *Config) { cfg.Observer = &obs })
	r := &Request{Method: "GET", Path: "/x", Route: "GET /x", Header: http.Header{"X-Api-Version": {"v1"}}}
	if err := c.Do(context.Background(), r, judgeStatus(&c)); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", calls.Load())
	}
	for _, a := range auths {
		if a != "Bearer "+secret+"|v1" {
			t.Errorf("request headers = %q", strings.ReplaceAll(a, secret, Redacted))
		}
	}
	if len(sl.d) != 2 || sl.d[1] != 3*time.Second || sl.d[0] < time.Millisecond || sl.d[0] > 2*time.Millisecond {
		t.Errorf("sleeps = %v, want [1ms..2ms, 3s]", sl.d)
	}
	want := []string{"GET /x 503 #1 err=true", "GET /x 429 #2 err=true", "GET /x 200 #3 err=false"}
	if fmt.Sprint(obs.got) != fmt.Sprint(want) {
		t.Errorf("observed %v, want %v", obs.got, want)
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	srv, calls := server(t, answer(500, `{"message":"boom"}`))
	var c *Client
	c, _, _ = newTestClient(t, srv.URL, nil)
	err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, judgeStatus(&c))
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 4 {
		t.Errorf("%d calls, want 4", calls.Load())
	}
}

func TestBodyCap(t *testing.T) {
	srv, _ := server(t, answer(200, strings.Repeat("x", 100)))
	var c *Client
	c, _, _ = newTestClient(t, srv.URL, func(cfg *Config) { cfg.MaxBodyBytes = 99 })
	var got Response
	err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, func(r *Request, res *Response, a int) Verdict {
		got = *res
		return judgeStatus(&c)(r, res, a)
	})
	if err == nil || !got.TooLarge || got.Body != nil {
		t.Fatalf("err = %v, tooLarge = %v, body = %d bytes", err, got.TooLarge, len(got.Body))
	}
	c2, _, _ := newTestClient(t, srv.URL, func(cfg *Config) { cfg.MaxBodyBytes = 100 })
	if err := c2.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, judgeStatus(&c2)); err != nil {
		t.Errorf("body of exactly the cap: %v", err)
	}
}

// An Authorizer that fails stops the call before anything is sent, and the
// Authorizer runs before every attempt (a token source may renew between).
func TestAuthorizerPerAttempt(t *testing.T) {
	srv, calls := server(t, answer(503, ""), answer(200, ""))
	var n atomic.Int64
	var seen []string
	var c *Client
	c, _, _ = newTestClient(t, srv.URL, func(cfg *Config) {
		cfg.Auth = AuthorizerFunc(func(_ context.Context, req *http.Request) error {
			i := n.Add(1)
			seen = append(seen, fmt.Sprint(i))
			req.Header.Set("Authorization", fmt.Sprintf("Bearer t%d", i))
			return nil
		})
	})
	if err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, judgeStatus(&c)); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 || calls.Load() != 2 {
		t.Errorf("authorized %d times for %d calls, want 2 and 2", n.Load(), calls.Load())
	}

	refused := errors.New("run syncd auth login again")
	c3, _, _ := newTestClient(t, srv.URL, func(cfg *Config) {
		cfg.Auth = AuthorizerFunc(func(context.Context, *http.Request) error { return refused })
	})
	before := calls.Load()
	err := c3.Do(context.Background(), &Request{Method: "GET", Path: "/y"}, judgeStatus(&c3))
	var afe *AuthFailedError
	if !errors.Is(err, refused) || !errors.As(err, &afe) || afe.Endpoint != "GET /y" {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != before {
		t.Error("a request was sent without credentials")
	}
}

// Each retry wait of a second or more is logged at info level with its
// cause, the attempt it waits for and the wait; at most one line per key per
// second, so a storm of 429s cannot flood the log.
func TestLongRetryWaitLogged(t *testing.T) {
	srv, _ := server(t, answer(429, `{"message":"slow down `+secret+`"}`, "Retry-After", "2"))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var c *Client
	c, _, logs := newTestClient(t, srv.URL, func(cfg *Config) {
		cfg.MaxAttempts = 3
		cfg.Now = func() time.Time { return now }
	})
	info := func() []observer.LoggedEntry {
		return logs.FilterLevelExact(zapcore.InfoLevel).All()
	}
	ctx := context.Background()
	_ = c.Do(ctx, &Request{Method: "GET", Path: "/forms/a/submissions", WaitKey: "form a"}, judgeStatus(&c))
	// Two waits (before attempts 2 and 3) in the same second: one line.
	lines := info()
	if len(lines) != 1 {
		t.Fatalf("%d info lines, want 1: %v", len(lines), lines)
	}
	m := lines[0].ContextMap()
	if m["key"] != "form a" || m["attempt"] != int64(2) || m["max_attempts"] != int64(3) || m["wait"] != 2*time.Second {
		t.Errorf("line = %s %v", lines[0].Message, m)
	}
	if cause, _ := m["cause"].(string); !strings.Contains(cause, "HTTP 429") || strings.Contains(cause, secret) {
		t.Errorf("cause = %q", strings.ReplaceAll(cause, secret, Redacted))
	}
	// Another key in the same second gets its own line.
	_ = c.Do(ctx, &Request{Method: "GET", Path: "/forms/b/submissions", WaitKey: "form b"}, judgeStatus(&c))
	if n := len(info()); n != 2 {
		t.Fatalf("%d info lines after a second key, want 2", n)
	}
	// A second later the first key may log again.
	now = now.Add(time.Second)
	_ = c.Do(ctx, &Request{Method: "GET", Path: "/forms/a/submissions", WaitKey: "form a"}, judgeStatus(&c))
	if n := len(info()); n != 3 {
		t.Fatalf("%d info lines a second later, want 3 (one more for key a)", n)
	}
}

// The first retry of a request is told at info whatever its wait (it may
// follow a long timeout); later short waits are routine and are not.
func TestOnlyTheFirstShortRetryWaitIsLogged(t *testing.T) {
	srv, _ := server(t, answer(503, ""), answer(503, ""), answer(200, ""))
	var c *Client
	c, _, logs := newTestClient(t, srv.URL, func(cfg *Config) { cfg.MaxBackoff = 999 * time.Millisecond })
	if err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, judgeStatus(&c)); err != nil {
		t.Fatal(err)
	}
	info := logs.FilterLevelExact(zapcore.InfoLevel).All()
	if len(info) != 1 || info[0].ContextMap()["attempt"] != int64(2) {
		t.Errorf("%d info lines for two sub-second waits, want 1, for the first retry: %v", len(info), info)
	}
	if n := logs.FilterLevelExact(zapcore.DebugLevel).Len(); n != 3 {
		t.Errorf("%d debug lines, want one per attempt (3)", n)
	}
}

// A server that accepts requests and never answers fails the request after
// NoAnswerAttempts timeouts, however many attempts 5xx answers would get.
func TestNoAnswerGivesUpAfterFewAttempts(t *testing.T) {
	var hits atomic.Int64
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	var c *Client
	c, _, _ = newTestClient(t, hang.URL, func(cfg *Config) {
		cfg.MaxAttempts, cfg.Timeout, cfg.MinBackoff, cfg.MaxBackoff = 10, 20*time.Millisecond, time.Millisecond, time.Millisecond
	})
	if err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x"}, judgeStatus(&c)); err == nil {
		t.Fatal("a server that never answers: no error")
	}
	if n := hits.Load(); n != NoAnswerAttempts {
		t.Errorf("%d attempts against a server that never answers, want %d", n, NoAnswerAttempts)
	}
}

func TestServerMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"message":"bad ` + secret + `"}`, "bad [REDACTED]"},
		{`{"error":"invalid_grant","error_description":"token used"}`, "token used"},
		{`{"error":"invalid_client"}`, "invalid_client"},
		{`{"status":"error","error":{"code":"ForbiddenException","message":"insufficient_scope: Required: BOOKING_READ"}}`, "insufficient_scope: Required: BOOKING_READ"},
		{"plain\ntext  " + secret, "plain text [REDACTED]"},
	}
	for _, tt := range tests {
		if got := ServerMessage([]byte(tt.body), secret, ""); got != tt.want {
			t.Errorf("ServerMessage(%q) = %q, want %q", strings.ReplaceAll(tt.body, secret, Redacted), got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"-1", 0, false}, {"junk", 0, false},
		{"7", 7 * time.Second, true}, {"3600", time.Minute, true},
		{now.Add(12 * time.Second).Format(http.TimeFormat), 12 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(http.Header{"Retry-After": {tt.v}}, now, time.Minute)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLimitersShareByCredential(t *testing.T) {
	var reg Limiters
	a := reg.Get("https://x", "k1", 5, 2)
	if reg.Get("https://x", "k1", 10, 3) != a {
		t.Error("one credential, two limiters")
	}
	if reg.Get("https://x", "k2", 5, 2) == a || reg.Get("https://y", "k1", 5, 2) == a {
		t.Error("different credentials or hosts share a limiter")
	}
	reg.Get("https://x", "k1", 1, 1)
	if a.Limit() != rate.Limit(1) || a.Burst() != 1 {
		t.Errorf("limiter = %v/%d, want the stricter 1/1", a.Limit(), a.Burst())
	}
}

func TestTransportAuthorizesAClone(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Header.Get("Authorization")) })
	hc := &http.Client{Transport: &Transport{Auth: Bearer("abc")}}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "Bearer abc" || req.Header.Get("Authorization") != "" {
		t.Errorf("server saw %q; caller's request header = %q", b, req.Header.Get("Authorization"))
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	c, _, _ := newTestClient(t, "http://127.0.0.1:1", nil)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", Bearer(secret)), fmt.Sprint(Bearer(secret))} {
		if strings.Contains(s, secret) {
			t.Errorf("secret printed: %s", strings.ReplaceAll(s, secret, Redacted))
		}
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.RateLimit = -1 }, "RateLimit must be a positive"},
		{func(c *Config) { c.Burst = -1 }, "Burst must be positive"},
		{func(c *Config) { c.MaxAttempts = -1 }, "MaxAttempts must be at least 1"},
		{func(c *Config) { c.Timeout = -1 }, "must not be negative"},
		{func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, "exceeds MaxBackoff"},
		{func(c *Config) { c.BaseURL = "" }, "is not a URL"},
	}
	for _, tt := range tests {
		cfg := Config{Name: "x client", BaseURL: "http://h"}
		tt.mutate(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "x client: ") {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
	}
	c, err := New(Config{BaseURL: "http://h"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(float64(c.Limiter().Limit()), c.Limiter().Burst(), c.MaxAttempts(), c.Timeout(), c.MaxBodyBytes())
	if want := fmt.Sprint(float64(5), 1, 6, time.Minute, int64(64<<20)); got != want {
		t.Errorf("defaults = %s, want %s", got, want)
	}
}

func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 1000)
	tests := []struct {
		name        string
		size, limit int64
		want        int
	}{
		{"announced", 1000, 2000, 1000},
		{"announced short", 10, 2000, 1000},
		{"announced zero", 0, 2000, 1000},
		{"unknown", -1, 2000, 1000},
		{"announced over the limit", 1000, 500, 500},
		{"announced short, over the limit", 10, 500, 500},
		{"unknown, over the limit", -1, 500, 500},
		{"announced long", 5000, 20000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := readBody(iotest.OneByteReader(strings.NewReader(body)), tt.size, tt.limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tt.want || string(b) != body[:tt.want] {
				t.Errorf("read %d bytes, want %d", len(b), tt.want)
			}
		})
	}
}
