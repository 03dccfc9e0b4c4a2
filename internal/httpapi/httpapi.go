// Package httpapi is the HTTP plumbing both of syncd's sources share: one
// rate limiter per credential, retries with full-jitter backoff on 429, 5xx
// and network errors (Retry-After honoured), capped response bodies, an
// Observer hook for metrics, a debug line per attempt, an info line per long
// retry wait, and authentication as a pluggable header provider.
//
// What an answer means is the caller's business: each source passes a Judge
// that turns one attempt into its own typed errors (the Forms API's
// AuthError, the scheduling API's ScopeError...), and this package only runs
// the attempts. That split keeps the retry rules in one place without making
// the sources' errors generic.
package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Defaults of Config, those the Forms client has always used.
const (
	DefaultRateLimit    = 5 // requests per second
	DefaultBurst        = 1
	DefaultMaxAttempts  = 6
	DefaultMinBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultTimeout      = 60 * time.Second
	DefaultMaxBodyBytes = 64 << 20
)

// NoAnswerAttempts bounds the attempts of a request that got no answer
// within the timeout: a server that accepts connections and never answers
// fails the request after about NoAnswerAttempts timeouts, not after
// MaxAttempts of them.
const NoAnswerAttempts = 4

// ErrorBodyCap bounds how much of a non-2xx body is read for its message.
const ErrorBodyCap = 64 << 10

// LongWait is the shortest retry wait logged at info level: shorter waits
// are routine and only show in the debug line of their attempt.
const LongWait = time.Second

// Observer receives one call per attempt, for metrics. endpoint is the route
// template ("GET /forms/{formId}/submissions"), so label cardinality stays
// bounded; status is 0 when no response arrived; err is nil on success.
type Observer interface {
	ObserveRequest(endpoint string, status int, attempt int, d time.Duration, err error)
}

type nopObserver struct{}

func (nopObserver) ObserveRequest(string, int, int, time.Duration, error) {}

// Config configures a Client. Zero values take the defaults above; callers
// that validate their own settings (with their own setting names) pass the
// resolved values.
type Config struct {
	// Name prefixes errors about settings and timeouts, e.g. "forms client".
	Name string
	// BaseURL is prepended to every Request.Path; the caller normalises it.
	BaseURL string
	// Auth sets the credentials of each attempt; nil sends none.
	Auth Authorizer
	// Limiter, when set, is used as is (shared by the clients of one
	// credential, see Limiters); else one is made from RateLimit and Burst.
	Limiter      *rate.Limiter
	RateLimit    float64 // requests/s, default 5
	Burst        int     // default 1
	MaxAttempts  int     // default 6 (first try + retries)
	MinBackoff   time.Duration
	MaxBackoff   time.Duration // also caps Retry-After
	Timeout      time.Duration // per attempt
	MaxBodyBytes int64         // cap of a 2xx body
	HTTPClient   *http.Client
	Logger       *zap.Logger
	Observer     Observer
	UserAgent    string
	// LogMessage is the message of the per-attempt debug line, e.g.
	// "forms api request".
	LogMessage string

	// Seams for tests; nil takes the real clock, sleep and random source.
	// They are called on every use, so a caller may route them through its
	// own replaceable fields.
	Now    func() time.Time
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func(n int64) int64 // uniform in [0, n)
}

// Client runs requests against one API with one credential. It is safe for
// concurrent use.
type Client struct {
	name        string
	base        string
	auth        Authorizer
	limiter     *rate.Limiter
	http        *http.Client
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	timeout     time.Duration
	maxBody     int64
	log         *zap.Logger
	obs         Observer
	userAgent   string
	logMessage  string
	now         func() time.Time
	sleep       func(ctx context.Context, d time.Duration) error
	jitter      func(n int64) int64
	waits       *waitLog
}

// New applies the defaults and checks the settings.
func New(cfg Config) (*Client, error) {
	name := cfg.Name
	if name == "" {
		name = "http client"
	}
	c := &Client{
		name:        name,
		base:        cfg.BaseURL,
		auth:        cfg.Auth,
		limiter:     cfg.Limiter,
		http:        cfg.HTTPClient,
		maxAttempts: cfg.MaxAttempts,
		minBackoff:  cfg.MinBackoff,
		maxBackoff:  cfg.MaxBackoff,
		timeout:     cfg.Timeout,
		maxBody:     cfg.MaxBodyBytes,
		log:         cfg.Logger,
		obs:         cfg.Observer,
		userAgent:   cfg.UserAgent,
		logMessage:  cfg.LogMessage,
		now:         cfg.Now,
		sleep:       cfg.Sleep,
		jitter:      cfg.Jitter,
		waits:       newWaitLog(),
	}
	if _, err := url.Parse(c.base); err != nil || c.base == "" {
		return nil, fmt.Errorf("%s: base URL %q is not a URL", name, c.base)
	}
	if c.limiter == nil {
		rl, burst := cfg.RateLimit, cfg.Burst
		switch {
		case rl == 0:
			rl = DefaultRateLimit
		case rl < 0 || math.IsNaN(rl) || math.IsInf(rl, 0):
			return nil, fmt.Errorf("%s: RateLimit must be a positive number of requests per second, got %g", name, rl)
		}
		switch {
		case burst == 0:
			burst = DefaultBurst
		case burst < 0:
			return nil, fmt.Errorf("%s: Burst must be positive, got %d", name, burst)
		}
		c.limiter = NewLimiter(rate.Limit(rl), burst)
	}
	switch {
	case c.maxAttempts == 0:
		c.maxAttempts = DefaultMaxAttempts
	case c.maxAttempts < 0:
		return nil, fmt.Errorf("%s: MaxAttempts must be at least 1, got %d", name, c.maxAttempts)
	}
	if c.minBackoff < 0 || c.maxBackoff < 0 || c.timeout < 0 || c.maxBody < 0 {
		return nil, fmt.Errorf("%s: MinBackoff, MaxBackoff, Timeout and MaxBodyBytes must not be negative", name)
	}
	if c.minBackoff == 0 {
		c.minBackoff = DefaultMinBackoff
	}
	if c.maxBackoff == 0 {
		c.maxBackoff = max(DefaultMaxBackoff, c.minBackoff)
	}
	if c.minBackoff > c.maxBackoff {
		return nil, fmt.Errorf("%s: MinBackoff (%s) exceeds MaxBackoff (%s)", name, c.minBackoff, c.maxBackoff)
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBodyBytes
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.logMessage == "" {
		c.logMessage = "api request"
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = SleepContext
	}
	if c.jitter == nil {
		c.jitter = rand.Int64N
	}
	return c, nil
}

// String names the client without its credentials.
func (c *Client) String() string {
	return fmt.Sprintf("httpapi.Client{Name: %q, BaseURL: %q}", c.name, c.base)
}

// Format makes every fmt verb print String.
func (c *Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// BaseURL is the URL every path is relative to.
func (c *Client) BaseURL() string { return c.base }

// Limiter is the rate limiter the client draws from.
func (c *Client) Limiter() *rate.Limiter { return c.limiter }

// MaxAttempts is the resolved number of attempts per call.
func (c *Client) MaxAttempts() int { return c.maxAttempts }

// Timeout is the resolved per-attempt timeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// MaxBodyBytes is the resolved cap of a 2xx body.
func (c *Client) MaxBodyBytes() int64 { return c.maxBody }

// Request is one logical call; Do turns it into one or more attempts.
type Request struct {
	Method string
	Path   string // escaped, relative to the base URL
	Route  string // template for metrics, e.g. "GET /forms/{formId}"
	Query  url.Values
	Body   []byte
	// ContentType of Body; default application/json.
	ContentType string
	// Header holds extra headers (an API version, say).
	Header http.Header
	// Mutating calls (creates, deletes) are retried only when the request
	// surely was not processed; the Judge decides with it.
	Mutating bool
	// WaitKey groups the info lines about long retry waits (at most one a
	// second per key); default: method and path.
	WaitKey string
	// Buffer, when it has room, receives a successful answer's body (the
	// Response's Body then shares it): a caller that reads page after page
	// hands back the last page's buffer instead of allocating one a page.
	Buffer []byte
}

// Endpoint names the call in errors: method and path, no query.
func (r *Request) Endpoint() string { return r.Method + " " + r.Path }

// Response is what one attempt produced.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Err      error // no response: transport error
	ReadErr  error // response arrived but its body could not be read
	TooLarge bool  // a 2xx body above MaxBodyBytes (Body is then nil)
	TimedOut bool  // the per-attempt Timeout fired
	Duration time.Duration
	// Credential is what the Authorizer put in the Authorization header
	// (its scheme cut off), so that a judge can hide it from a server
	// message that echoes the request's headers. Never logged.
	Credential string
}

// Verdict is what one attempt amounts to.
type Verdict struct {
	Err           error // nil on success; the error to return if no retry follows
	Retry         bool
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Refreshed says the retry follows a refreshed credential, not a
	// transient failure: it is granted beyond MaxAttempts, so that a 401
	// met on the last attempt still gets its retry. A judge grants it at
	// most once per call.
	Refreshed bool
}

// Judge classifies one attempt. It runs once per attempt, so it may decode a
// 2xx body and ask for a retry when the body arrived garbled.
type Judge func(r *Request, res *Response, attempt int) Verdict

// AuthFailedError wraps an Authorizer's error: the request was never sent.
type AuthFailedError struct {
	Endpoint string
	Err      error
}

func (e *AuthFailedError) Error() string { return fmt.Sprintf("%s: %v", e.Endpoint, e.Err) }
func (e *AuthFailedError) Unwrap() error { return e.Err }

// Do runs r until the judge accepts an attempt, fails it for good, or the
// attempts run out.
func (c *Client) Do(ctx context.Context, r *Request, judge Judge) error {
	ep := r.Endpoint()
	noAnswer := 0
	granted := 0 // attempts beyond maxAttempts: retries after a refresh
	for attempt := 1; ; attempt++ {
		if err := c.limiter.Wait(ctx); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("%s: wait for the rate limiter: %w", ep, cerr)
			}
			// Wait refuses at once when the deadline would pass first.
			return fmt.Errorf("%s: the rate limit leaves no time before the deadline: %w", ep, context.DeadlineExceeded)
		}
		res, authErr := c.send(ctx, r)
		if authErr != nil {
			// The credentials could not be had (a refused refresh token,
			// say): the token source has retried what it could.
			return &AuthFailedError{Endpoint: ep, Err: authErr}
		}
		v := judge(r, &res, attempt)
		if v.Err != nil && ctx.Err() != nil {
			// The caller gave up: say so rather than how the transport saw it.
			err := fmt.Errorf("%s: %w", ep, ctx.Err())
			c.record(r, &res, attempt, err, false, 0)
			return err
		}
		if res.TimedOut {
			noAnswer++
		}
		if v.Err != nil && v.Retry && v.Refreshed && granted == 0 {
			granted = 1
		}
		retry := v.Err != nil && v.Retry && attempt < c.maxAttempts+granted && noAnswer < NoAnswerAttempts
		var delay time.Duration
		if retry {
			delay = c.Backoff(attempt, v)
		}
		c.record(r, &res, attempt, v.Err, retry, delay)
		if !retry {
			return v.Err
		}
		c.noteWait(r, v.Err, attempt, delay)
		if err := c.sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s: wait before retrying: %w", ep, err)
		}
	}
}

// send makes one attempt under the per-attempt timeout, reading the body
// through a cap so that a runaway response cannot exhaust memory.
func (c *Client) send(ctx context.Context, r *Request) (res Response, authErr error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.base + r.Path
	if len(r.Query) > 0 {
		u += "?" + r.Query.Encode()
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(actx, r.Method, u, body)
	if err != nil {
		res.Err = err
		return res, nil
	}
	for k, vs := range r.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if r.Body != nil {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.auth != nil {
		if err := c.auth.Authorize(ctx, req); err != nil {
			return res, err
		}
		auth := req.Header.Get("Authorization")
		if _, cred, ok := strings.Cut(auth, " "); ok {
			auth = cred
		}
		res.Credential = auth
	}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	resp, err := c.http.Do(req)
	if err != nil {
		res.Err = err
		res.TimedOut = actx.Err() != nil
		return res, nil
	}
	defer resp.Body.Close()
	res.Status, res.Header = resp.StatusCode, resp.Header
	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	limit := c.maxBody
	if !success {
		limit = min(limit, ErrorBodyCap)
	}
	var buf []byte
	if success {
		buf = r.Buffer
	}
	b, err := readBody(resp.Body, resp.ContentLength, limit+1, buf)
	switch {
	case err != nil:
		res.ReadErr = err
		res.TimedOut = actx.Err() != nil
	case int64(len(b)) > limit:
		if success {
			res.TooLarge = true
			b = nil
		} else {
			b = b[:limit] // only the message is wanted
		}
	}
	res.Body = b
	return res, nil
}

// Backoff is the wait before attempt+1: Retry-After when the server sent one
// (capped at MaxBackoff), else full jitter: uniform in
// [MinBackoff, min(MaxBackoff, MinBackoff·2^attempt)].
func (c *Client) Backoff(attempt int, v Verdict) time.Duration {
	if v.HasRetryAfter {
		return min(v.RetryAfter, c.maxBackoff)
	}
	ceil := c.minBackoff
	for i := 0; i < attempt && ceil < c.maxBackoff; i++ {
		ceil *= 2
	}
	ceil = min(ceil, c.maxBackoff)
	span := int64(ceil - c.minBackoff)
	if span <= 0 {
		return c.minBackoff
	}
	return c.minBackoff + time.Duration(c.jitter(span+1))
}

// RetryAfter reads the Retry-After header of h, capped at MaxBackoff.
func (c *Client) RetryAfter(h http.Header) (time.Duration, bool) {
	return ParseRetryAfter(h, c.now(), c.maxBackoff)
}

// record reports one attempt to the observer and the debug log.
func (c *Client) record(r *Request, res *Response, attempt int, err error, retry bool, delay time.Duration) {
	c.obs.ObserveRequest(r.Route, res.Status, attempt, res.Duration, err)
	if ce := c.log.Check(zap.DebugLevel, c.logMessage); ce != nil {
		fields := []zap.Field{
			zap.String(logkey.Endpoint, r.Route),
			zap.String(logkey.Path, r.Path),
			zap.Int(logkey.Status, res.Status),
			zap.Int(logkey.Attempt, attempt),
			zap.Duration(logkey.Duration, res.Duration),
		}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		if retry {
			fields = append(fields, zap.Duration(logkey.RetryIn, delay))
		}
		ce.Write(fields...)
	}
}

// noteWait logs the first retry of a request, and any retry wait of
// LongWait or more, at info level, at most one line a second per wait key: a long wait is what an operator watching a
// stalled sync needs to see, but a storm of 429s must not flood the log.
func (c *Client) noteWait(r *Request, cause error, attempt int, wait time.Duration) {
	if wait < LongWait && attempt > 1 {
		return // the first retry is always told: it may follow a long timeout
	}
	key := r.WaitKey
	if key == "" {
		key = r.Endpoint()
	}
	if !c.waits.allow(key, c.now()) {
		return
	}
	msg := "no cause"
	if cause != nil {
		msg = cause.Error()
	}
	c.log.Info("waiting before retrying",
		zap.String(logkey.Key, key),
		zap.String(logkey.Cause, msg),
		zap.Int(logkey.Attempt, attempt+1),
		zap.Int(logkey.MaxAttempts, c.maxAttempts),
		zap.Duration(logkey.Wait, wait),
	)
}

// TransientStatus reports the statuses worth retrying: 408, 429, 500, 502,
// 503, 504.
func TransientStatus(s int) bool {
	switch s {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// SleepContext waits d or until ctx is done.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readBody reads at most limit bytes of r. A body whose length is announced
// (size, -1 if not) is read into one buffer of that size: io.ReadAll grows
// its buffer by doubling from 512 bytes, copying a page of submissions
// (hundreds of kilobytes) a dozen times.
func readBody(r io.Reader, size, limit int64, buf []byte) ([]byte, error) {
	if size < 0 || size >= limit {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	// One byte more than announced, so that a longer body is seen (and read
	// on, up to limit) rather than cut.
	b := buf[:0]
	if int64(cap(b)) < size+1 {
		b = make([]byte, 0, size+1)
	} else {
		b = b[: 0 : size+1]
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			rest, err := io.ReadAll(io.LimitReader(r, limit-int64(len(b))))
			return append(b, rest...), err
		}
	}
}
