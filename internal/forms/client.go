package forms

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
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

// errorBodyCap bounds how much of a non-2xx body is read for its message.
const errorBodyCap = 64 << 10

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
type Observer interface {
	ObserveRequest(endpoint string, status int, attempt int, d time.Duration, err error)
}

type nopObserver struct{}

func (nopObserver) ObserveRequest(string, int, int, time.Duration, error) {}

// Client talks to one Forms API deployment with one API key. It is safe for
// concurrent use; all its requests, and those of every client sharing its
// Limiters and key, go through one rate limiter.
type Client struct {
	base        string // normalised base URL, no trailing slash
	key         string // kept only to scrub it from server messages
	auth        string // the Authorization header value
	userAgent   string
	limiter     *rate.Limiter
	http        *http.Client
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	timeout     time.Duration
	maxBody     int64
	log         *zap.Logger
	obs         Observer

	// Seams replaced by this package's tests.
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
		http:        cfg.HTTPClient,
		maxAttempts: cfg.MaxAttempts,
		minBackoff:  cfg.MinBackoff,
		maxBackoff:  cfg.MaxBackoff,
		timeout:     cfg.Timeout,
		maxBody:     cfg.MaxBodyBytes,
		log:         cfg.Logger,
		obs:         cfg.Observer,
		now:         time.Now,
		sleep:       sleepContext,
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
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	if cfg.Limiters != nil {
		c.limiter = cfg.Limiters.get(base, key, rate.Limit(rl), burst)
	} else {
		c.limiter = rate.NewLimiter(rate.Limit(rl), burst)
	}
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
}

// endpoint names the call in errors: method and path, no query.
func (r *request) endpoint() string { return r.method + " " + r.path }

// response is what one attempt produced.
type response struct {
	status   int
	header   http.Header
	body     []byte
	err      error // no response: transport error
	readErr  error // response arrived but its body could not be read
	tooLarge bool
	timedOut bool // the per-attempt Timeout fired
	duration time.Duration
}

// verdict is what one attempt amounts to.
type verdict struct {
	err           error // nil on success; the error to return if no retry follows
	retry         bool
	retryAfter    time.Duration
	hasRetryAfter bool
}

// do runs r until it succeeds, fails for good or runs out of attempts.
// decode, when not nil, reads a 2xx body; it runs per attempt so that a
// garbled body can be fetched again.
func (c *Client) do(ctx context.Context, r *request, decode func([]byte) error) error {
	ep := r.endpoint()
	for attempt := 1; ; attempt++ {
		if err := c.limiter.Wait(ctx); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("%s: wait for the rate limiter: %w", ep, cerr)
			}
			// Wait refuses at once when the deadline would pass first.
			return fmt.Errorf("%s: the rate limit leaves no time before the deadline: %w", ep, context.DeadlineExceeded)
		}
		res := c.send(ctx, r)
		v := c.judge(r, &res, attempt, decode)
		if v.err != nil && ctx.Err() != nil {
			// The caller gave up: say so rather than how the transport saw it.
			err := fmt.Errorf("%s: %w", ep, ctx.Err())
			c.record(r, &res, attempt, err, false, 0)
			return err
		}
		retry := v.err != nil && v.retry && attempt < c.maxAttempts
		var delay time.Duration
		if retry {
			delay = c.backoff(attempt, v)
		}
		c.record(r, &res, attempt, v.err, retry, delay)
		if !retry {
			return v.err
		}
		if err := c.sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s: wait before retrying: %w", ep, err)
		}
	}
}

// send makes one attempt under the per-attempt timeout, reading the body
// through a cap so that a runaway response cannot exhaust memory.
func (c *Client) send(ctx context.Context, r *request) (res response) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(actx, r.method, u, body)
	if err != nil {
		res.err = err
		return res
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	defer func() { res.duration = time.Since(start) }()
	resp, err := c.http.Do(req)
	if err != nil {
		res.err = err
		res.timedOut = actx.Err() != nil
		return res
	}
	defer resp.Body.Close()
	res.status, res.header = resp.StatusCode, resp.Header
	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	limit := c.maxBody
	if !success {
		limit = min(limit, errorBodyCap)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		res.readErr = err
		res.timedOut = actx.Err() != nil
	case int64(len(b)) > limit:
		if success {
			res.tooLarge = true
			b = nil
		} else {
			b = b[:limit] // only the message is wanted
		}
	}
	res.body = b
	return res
}

// judge classifies one attempt.
func (c *Client) judge(r *request, res *response, attempt int, decode func([]byte) error) verdict {
	ep := r.endpoint()
	if res.err != nil {
		notSent := requestNotSent(res.err)
		err := res.err
		if res.timedOut {
			err = fmt.Errorf("no answer within %s (forms client Timeout): %w", c.timeout, err)
		}
		return verdict{
			err:   &UnavailableError{Endpoint: ep, Attempts: attempt, Err: err, Uncertain: r.mutating && !notSent},
			retry: !permanentNetError(res.err) && (!r.mutating || notSent),
		}
	}
	switch s := res.status; {
	case s >= 200 && s < 300:
		if decode == nil {
			return verdict{} // done; what the body says does not matter
		}
		switch {
		case res.tooLarge:
			return verdict{err: &DecodeError{Endpoint: ep, Err: &bodyTooLargeError{limit: c.maxBody}}}
		case res.readErr != nil && res.timedOut:
			return verdict{
				err:   &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: fmt.Errorf("body not read within %s (forms client Timeout): %w", c.timeout, res.readErr)},
				retry: !r.mutating,
			}
		case res.readErr != nil:
			// A body cut off on the way is transient on real networks.
			return verdict{err: &DecodeError{Endpoint: ep, Err: fmt.Errorf("read body: %w", res.readErr)}, retry: !r.mutating}
		}
		if err := decode(res.body); err != nil {
			return verdict{err: &DecodeError{Endpoint: ep, Err: err}, retry: !r.mutating && transientDecodeError(err)}
		}
		return verdict{}
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return verdict{err: &AuthError{BaseURL: c.base, Status: s}}
	case s == http.StatusNotFound:
		return verdict{err: r.notFound(c.base)}
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s == http.StatusInternalServerError ||
		s == http.StatusBadGateway || s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		safe := !r.mutating || s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable
		v := verdict{
			err:   &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: c.messageError(res.body), Uncertain: !safe},
			retry: safe,
		}
		v.retryAfter, v.hasRetryAfter = c.retryAfter(res.header)
		return v
	case s >= 400 && s < 500:
		return verdict{err: &BadRequestError{Endpoint: ep, Status: s, Message: c.serverMessage(res.body)}}
	default:
		return verdict{err: &UnavailableError{Endpoint: ep, Status: s, Attempts: attempt, Err: c.messageError(res.body), Uncertain: r.mutating && s >= 500}}
	}
}

// backoff is the wait before attempt+1: Retry-After when the server sent one
// (capped at MaxBackoff), else full jitter: uniform in
// [MinBackoff, min(MaxBackoff, MinBackoff·2^attempt)].
func (c *Client) backoff(attempt int, v verdict) time.Duration {
	if v.hasRetryAfter {
		return min(v.retryAfter, c.maxBackoff)
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

// retryAfter reads Retry-After as seconds or an HTTP date.
func (c *Client) retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(c.maxBackoff/time.Second) {
			return c.maxBackoff, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(c.now()), 0), c.maxBackoff), true
	}
	return 0, false
}

// record reports one attempt to the observer and the debug log.
func (c *Client) record(r *request, res *response, attempt int, err error, retry bool, delay time.Duration) {
	c.obs.ObserveRequest(r.route, res.status, attempt, res.duration, err)
	if ce := c.log.Check(zap.DebugLevel, "forms api request"); ce != nil {
		fields := []zap.Field{
			zap.String("endpoint", r.route),
			zap.String("path", r.path),
			zap.Int("status", res.status),
			zap.Int("attempt", attempt),
			zap.Duration("duration", res.duration),
		}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		if retry {
			fields = append(fields, zap.Duration("retry_in", delay))
		}
		ce.Write(fields...)
	}
}

// serverMessage extracts a human message from an error body: the "message"
// (or "error") of a JSON object, else the text itself. The API key is
// removed first, in case the server or a proxy echoes request headers, then
// the text is flattened to one line and shortened.
func (c *Client) serverMessage(body []byte) string {
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
	msg = strings.ReplaceAll(msg, c.key, "[REDACTED]")
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
	}), " ")
	const maxRunes = 300
	if utf8.RuneCountInString(msg) > maxRunes {
		msg = string([]rune(msg)[:maxRunes]) + "…"
	}
	return msg
}

// messageError is serverMessage as an error, nil when there is none.
func (c *Client) messageError(body []byte) error {
	if msg := c.serverMessage(body); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// requestNotSent reports whether err happened before the request could reach
// the server: the connection (or the proxy's) never opened.
func requestNotSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// permanentNetError reports transport failures that retrying cannot fix: an
// unknown host or a certificate that does not verify.
func permanentNetError(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return true
	}
	var cert *tls.CertificateVerificationError
	return errors.As(err, &cert)
}

// sleepContext waits d or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
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
