package forms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// Defaults of Config.
const (
	DefaultRateLimit    = 5 // requests per second per key, the service's documented limit
	DefaultBurst        = 1
	DefaultMaxAttempts  = 6
	DefaultMinBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultTimeout      = 60 * time.Second
	DefaultMaxBodyBytes = 64 << 20
	DefaultUserAgent    = "syncd-forms-client"
)

// MaxListLimit is the largest page the submissions list accepts.
const MaxListLimit = 150

// Config configures a Client. Zero values take the defaults above.
type Config struct {
	BaseURL      string        // e.g. https://api.fillout.com/v1/api; required, never derived from the key
	APIKey       string        `json:"-"` // required; surrounding whitespace is trimmed
	RateLimit    float64       // requests/s for this key, default 5
	Burst        int           // default 1
	MaxAttempts  int           // default 6 (first try + retries)
	MinBackoff   time.Duration // default 500ms
	MaxBackoff   time.Duration // default 30s; also caps Retry-After
	Timeout      time.Duration // per attempt, default 60s
	MaxBodyBytes int64         // response cap, default 64 MiB
	HTTPClient   *http.Client  // optional
	Limiters     *Limiters     // optional shared registry: one rate limiter per API key across clients
	Logger       *zap.Logger   // optional; debug line per attempt (never the key)
	Observer     Observer      // optional hook for metrics: called once per attempt
	UserAgent    string        // optional, default DefaultUserAgent
}

// String keeps the API key out of anything that prints a Config.
func (c Config) String() string {
	return fmt.Sprintf("forms.Config{BaseURL: %q, APIKey: [REDACTED], RateLimit: %g, Burst: %d, MaxAttempts: %d, MinBackoff: %s, MaxBackoff: %s, Timeout: %s, MaxBodyBytes: %d}",
		c.BaseURL, c.RateLimit, c.Burst, c.MaxAttempts, c.MinBackoff, c.MaxBackoff, c.Timeout, c.MaxBodyBytes)
}

// Format makes every fmt verb (%v, %+v, %#v, %d...) print String.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// MarshalLogObject keeps the API key out of zap.Any(cfg).
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("base_url", c.BaseURL)
	enc.AddString("api_key", "[REDACTED]")
	enc.AddFloat64("rate_limit", c.RateLimit)
	enc.AddInt("burst", c.Burst)
	enc.AddInt("max_attempts", c.MaxAttempts)
	enc.AddDuration("timeout", c.Timeout)
	return nil
}

// Observer receives one call per attempt, for metrics. endpoint is the route
// template ("GET /forms/{formId}/submissions"), so label cardinality stays
// bounded; status is 0 when no response arrived; err is nil on success.
type Observer = httpapi.Observer

// Client talks to one Forms API deployment with one API key. It is safe for
// concurrent use; all its requests, and those of every client sharing its
// Limiters and key, go through one rate limiter.
type Client struct {
	base        string // normalised base URL, no trailing slash
	key         string // kept only to scrub it from server messages
	auth        string // the Authorization header value
	userAgent   string
	limiter     *rate.Limiter
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	timeout     time.Duration
	maxBody     int64
	api         *httpapi.Client // runs the attempts: limiter, retries, caps, logs

	// Seams replaced by this package's tests; api calls them on every use.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(n int64) int64 // uniform in [0, n)
}

// String keeps the API key out of anything that prints a Client.
func (c *Client) String() string { return fmt.Sprintf("forms.Client{BaseURL: %q}", c.base) }

// Format makes every fmt verb print String: the default struct printing
// would show unexported fields, the key among them.
func (c *Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// BaseURL is the normalised base URL the client sends to.
func (c *Client) BaseURL() string { return c.base }

// New validates cfg, applies defaults and returns a client. Errors name the
// setting at fault and never contain the key.
func New(cfg Config) (*Client, error) {
	base, err := normaliseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(cfg.APIKey)
	if key == "" {
		return nil, errors.New("forms client: APIKey is required (source.api_key / FORMS_API_KEY)")
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f || r == utf8.RuneError }) {
		// Not echoed: even a malformed key is a secret.
		return nil, errors.New("forms client: APIKey contains whitespace or control characters (source.api_key / FORMS_API_KEY)")
	}
	c := &Client{
		base:        base,
		key:         key,
		auth:        "Bearer " + key,
		userAgent:   cfg.UserAgent,
		maxAttempts: cfg.MaxAttempts,
		minBackoff:  cfg.MinBackoff,
		maxBackoff:  cfg.MaxBackoff,
		timeout:     cfg.Timeout,
		maxBody:     cfg.MaxBodyBytes,
		now:         time.Now,
		sleep:       httpapi.SleepContext,
		jitter:      rand.Int64N,
	}
	rl, burst := cfg.RateLimit, cfg.Burst
	switch {
	case rl == 0:
		rl = DefaultRateLimit
	case rl < 0 || math.IsNaN(rl) || math.IsInf(rl, 0):
		return nil, fmt.Errorf("forms client: RateLimit must be a positive number of requests per second, got %g", rl)
	}
	switch {
	case burst == 0:
		burst = DefaultBurst
	case burst < 0:
		return nil, fmt.Errorf("forms client: Burst must be positive, got %d", burst)
	}
	switch {
	case c.maxAttempts == 0:
		c.maxAttempts = DefaultMaxAttempts
	case c.maxAttempts < 0:
		return nil, fmt.Errorf("forms client: MaxAttempts must be at least 1, got %d", c.maxAttempts)
	}
	if c.minBackoff < 0 || c.maxBackoff < 0 || c.timeout < 0 || c.maxBody < 0 {
		return nil, errors.New("forms client: MinBackoff, MaxBackoff, Timeout and MaxBodyBytes must not be negative")
	}
	if c.minBackoff == 0 {
		c.minBackoff = DefaultMinBackoff
	}
	if c.maxBackoff == 0 {
		c.maxBackoff = max(DefaultMaxBackoff, c.minBackoff)
	}
	if c.minBackoff > c.maxBackoff {
		return nil, fmt.Errorf("forms client: MinBackoff (%s) exceeds MaxBackoff (%s)", c.minBackoff, c.maxBackoff)
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBodyBytes
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	if cfg.Limiters != nil {
		c.limiter = cfg.Limiters.get(base, key, rate.Limit(rl), burst)
	} else {
		c.limiter = httpapi.NewLimiter(rate.Limit(rl), burst)
	}
	api, err := httpapi.New(httpapi.Config{
		Name:         "forms client",
		BaseURL:      base,
		Auth:         httpapi.StaticHeader{Name: "Authorization", Value: c.auth},
		Limiter:      c.limiter,
		MaxAttempts:  c.maxAttempts,
		MinBackoff:   c.minBackoff,
		MaxBackoff:   c.maxBackoff,
		Timeout:      c.timeout,
		MaxBodyBytes: c.maxBody,
		HTTPClient:   cfg.HTTPClient,
		Logger:       cfg.Logger,
		Observer:     cfg.Observer,
		UserAgent:    c.userAgent,
		LogMessage:   "forms api request",
		Now:          func() time.Time { return c.now() },
		Sleep:        func(ctx context.Context, d time.Duration) error { return c.sleep(ctx, d) },
		Jitter:       func(n int64) int64 { return c.jitter(n) },
	})
	if err != nil {
		return nil, err
	}
	c.api = api
	return c, nil
}

// normaliseBaseURL checks the base URL and drops a trailing slash.
func normaliseBaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("forms client: BaseURL is required (source.base_url), e.g. https://api.fillout.com/v1/api")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("forms client: BaseURL (source.base_url) is not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("forms client: BaseURL (source.base_url) must start with https:// or http://, got %q", u.Redacted())
	case u.Host == "":
		return "", fmt.Errorf("forms client: BaseURL (source.base_url) has no host: %q", u.Redacted())
	case u.User != nil:
		return "", errors.New("forms client: BaseURL (source.base_url) must not carry credentials: the API key goes in source.api_key")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("forms client: BaseURL (source.base_url) must not have a query or fragment: %q", u.Redacted())
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return strings.TrimRight(u.String(), "/"), nil
}

// request is one logical call; do turns it into one or more attempts.
type request struct {
	method string
	path   string // escaped, relative to the base URL
	route  string // template for metrics, e.g. "GET /forms/{formId}"
	query  url.Values
	body   []byte
	// mutating calls (create, delete, webhooks) are retried only when the
	// request surely was not processed: a connection that never opened, or a
	// 429 or 503. After a timeout or another 5xx the request may have been
	// applied, and repeating a create would duplicate an import.
	mutating bool
	notFound func(base string) *NotFoundError
	buffer   []byte // for the body of a success (httpapi.Request.Buffer)
	// hide is what, beyond the API key, the server's messages about this
	// request must not show: secrets the request sent (a webhook URL and
	// its path token), which a service may echo back in an error that then
	// reaches the logs.
	hide []redaction
}

// redaction replaces secret with with in a server's message.
type redaction struct{ secret, with string }

// endpoint names the call in errors: method and path, no query.
func (r *request) endpoint() string { return r.method + " " + r.path }

// response and verdict are httpapi's, under the names this file has always
// used.
type (
	response = httpapi.Response
	verdict  = httpapi.Verdict
)

// do runs r until it succeeds, fails for good or runs out of attempts.
// decode, when not nil, reads a 2xx body; it runs per attempt so that a
// garbled body can be fetched again.
func (c *Client) do(ctx context.Context, r *request, decode func([]byte) error) error {
	hr := &httpapi.Request{
		Method: r.method, Path: r.path, Route: r.route, Query: r.query, Body: r.body,
		Mutating: r.mutating, Buffer: r.buffer,
	}
	return c.api.Do(ctx, hr, func(_ *httpapi.Request, res *httpapi.Response, attempt int) httpapi.Verdict {
		return c.judge(r, res, attempt, decode)
	})
}

// judge classifies one attempt.
func (c *Client) judge(r *request, res *response, attempt int, decode func([]byte) error) verdict {
	ep := r.endpoint()
	if res.Err != nil {
		notSent := httpapi.RequestNotSent(res.Err)
		err := res.Err
		if res.TimedOut {
			err = fmt.Errorf("no answer within %s (forms client Timeout): %w", c.timeout, err)
		}
		return verdict{
			Err:   &UnavailableError{Endpoint: ep, Attempts: attempt, Err: err, Uncertain: r.mutating && !notSent},
			Retry: !httpapi.PermanentNetError(res.Err) && (!r.mutating || notSent),
		}
	}
	switch s := res.Status; {
	case s >= 200 && s < 300:
		if decode == nil {
			return verdict{} // done; what the body says does not matter
		}
		switch {
		case res.TooLarge:
			return verdict{Err: &DecodeError{Endpoint: ep, Err: &bodyTooLargeError{limit: c.maxBody}}}
		case res.ReadErr != nil && res.TimedOut:
			return verdict{
				Err:   &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: fmt.Errorf("body not read within %s (forms client Timeout): %w", c.timeout, res.ReadErr)},
				Retry: !r.mutating,
			}
		case res.ReadErr != nil:
			// A body cut off on the way is transient on real networks.
			return verdict{Err: &DecodeError{Endpoint: ep, Err: fmt.Errorf("read body: %w", res.ReadErr)}, Retry: !r.mutating}
		}
		if err := decode(res.Body); err != nil {
			return verdict{Err: &DecodeError{Endpoint: ep, Err: err}, Retry: !r.mutating && transientDecodeError(err)}
		}
		return verdict{}
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return verdict{Err: &AuthError{BaseURL: c.base, Status: s}}
	case s == http.StatusNotFound:
		return verdict{Err: r.notFound(c.base)}
	case httpapi.TransientStatus(s):
		safe := !r.mutating || s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable
		v := verdict{
			Err:   &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: c.messageError(res.Body, r.hide...), Uncertain: !safe},
			Retry: safe,
		}
		v.RetryAfter, v.HasRetryAfter = c.retryAfter(res.Header)
		return v
	case s >= 400 && s < 500:
		return verdict{Err: &BadRequestError{Endpoint: ep, Status: s, Message: c.serverMessage(res.Body, r.hide...)}}
	default:
		return verdict{Err: &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: c.messageError(res.Body, r.hide...), Uncertain: r.mutating && s >= 500}}
	}
}

// retryAfter reads Retry-After as seconds or an HTTP date, capped at
// MaxBackoff.
func (c *Client) retryAfter(h http.Header) (time.Duration, bool) {
	return httpapi.ParseRetryAfter(h, c.now(), c.maxBackoff)
}

// serverMessage extracts a human message from an error body: the "message"
// (or "error") of a JSON object, else the text itself. The API key and the
// request's own secrets (hide) are removed first, in case the server or a
// proxy echoes request headers or the body, then the text is flattened to
// one line and shortened.
func (c *Client) serverMessage(body []byte, hide ...redaction) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &m) == nil {
		msg = scalarText(m.Message)
		if msg == "" {
			msg = scalarText(m.Error)
		}
	}
	if msg == "" {
		msg = string(body)
	}
	// The key first (a request's secret replaced before it could cut
	// through the key), the request's secrets next, and only then Scrub's
	// shortening, which could cut a secret and leave part of it.
	if c.key != "" {
		msg = strings.ReplaceAll(msg, c.key, httpapi.Redacted)
	}
	for _, h := range hide {
		if h.secret != "" {
			msg = strings.ReplaceAll(msg, h.secret, h.with)
		}
	}
	return httpapi.Scrub(msg, c.key)
}

// messageError is serverMessage as an error, nil when there is none.
func (c *Client) messageError(body []byte, hide ...redaction) error {
	if msg := c.serverMessage(body, hide...); msg != "" {
		return errors.New(msg)
	}
	return nil
}
