// Package scheduling is syncd's second source: bookings from the scheduling
// API (Cal.com API v2), read with an OAuth access token on behalf of a user.
//
// Client calls GET /v2/me and GET /v2/bookings (header cal-api-version:
// 2024-08-13) through internal/httpapi, with the Bearer token of an
// oauth.TokenSource. Changes walks the bookings whose current version falls
// in a half-open window of version time, which is what the poller commits
// exactly once; BookingsSchema and RecordBuilder turn them into Arrow
// records with typed columns, lineage and version columns.
//
// The cursor is the booking's updatedAt. The API filters on it
// (afterUpdatedAt/beforeUpdatedAt, inclusive: ">=" and "<=") and sorts by it
// (sortUpdatedAt); Prisma's @updatedAt sets it on creation and on every
// change (cancel, reschedule, confirm...), so a window of updatedAt holds
// each change once, creations included. Rows whose updatedAt is null (older
// rows) never match an updatedAt filter, so each window also walks
// createdAt (afterCreatedAt/beforeCreatedAt, sortCreated) and keeps only
// those rows. A window closes in the past (now - safety lag), so bookings
// can leave it while it is paged (a change moves them later) but never
// enter it; paging is keyset on the cursor (after = last time seen) rather
// than by offset, so a departure cannot shift a booking out of sight.
package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
)

// APIVersion is the cal-api-version GET /v2/bookings is called with.
const APIVersion = "2024-08-13"

// MaxTake is the largest page GET /v2/bookings accepts.
const MaxTake = 250

// Scopes the endpoints need.
const (
	ScopeBookingRead  = "BOOKING_READ"
	ScopeProfileRead  = "PROFILE_READ"
	ScopeWebhookRead  = "WEBHOOK_READ"
	ScopeWebhookWrite = "WEBHOOK_WRITE"
)

// Route templates, as reported to the Observer.
const (
	RouteMe            = "GET /v2/me"
	RouteBookings      = "GET /v2/bookings"
	RouteListWebhooks  = "GET /v2/webhooks"
	RouteCreateWebhook = "POST /v2/webhooks"
	RouteDeleteWebhook = "DELETE /v2/webhooks/{id}"
)

// AllStatuses are the status filters whose union is every booking: the
// client asks for all of them explicitly rather than trusting the API's
// default.
var AllStatuses = []string{"upcoming", "recurring", "past", "cancelled", "unconfirmed"}

// Tokens hands out access tokens; *oauth.TokenSource is one.
type Tokens interface {
	Token(ctx context.Context) (oauth.Token, error)
	Invalidate(accessToken string)
}

// Config configures a Client. Zero values take httpapi's defaults.
type Config struct {
	BaseURL     string // API root, e.g. https://api.cal.com
	Tokens      Tokens // required
	Limiter     *rate.Limiter
	RateLimit   float64
	Burst       int
	MaxAttempts int
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	Timeout     time.Duration
	HTTPClient  *http.Client
	Logger      *zap.Logger
	Observer    httpapi.Observer
}

// Client reads one user's bookings. Safe for concurrent use.
type Client struct {
	api    *httpapi.Client
	tokens Tokens
	base   string
}

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("scheduling client: scheduling.base_url must be the API root, e.g. https://api.cal.com, got %q", cfg.BaseURL)
	}
	if cfg.Tokens == nil {
		return nil, errors.New("scheduling client: no token source: run `syncd auth login` first")
	}
	c := &Client{tokens: cfg.Tokens, base: u.String()}
	c.api, err = httpapi.New(httpapi.Config{
		Name:        "scheduling client",
		BaseURL:     c.base,
		Auth:        httpapi.AuthorizerFunc(c.authorize),
		Limiter:     cfg.Limiter,
		RateLimit:   cfg.RateLimit,
		Burst:       cfg.Burst,
		MaxAttempts: cfg.MaxAttempts,
		MinBackoff:  cfg.MinBackoff,
		MaxBackoff:  cfg.MaxBackoff,
		Timeout:     cfg.Timeout,
		HTTPClient:  cfg.HTTPClient,
		Logger:      cfg.Logger,
		Observer:    cfg.Observer,
		UserAgent:   "syncd-scheduling-client",
		LogMessage:  "scheduling api request",
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// String names the client.
func (c *Client) String() string { return fmt.Sprintf("scheduling.Client{BaseURL: %q}", c.base) }

func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	t, err := c.tokens.Token(ctx)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.AccessToken)
	return nil
}

// APIError is an answer the client cannot use: a refused request (400,
// 401, 403 other than a missing scope, 404), or a service that kept failing.
type APIError struct {
	Endpoint string
	Status   int // 0: no answer (network)
	Message  string
	Attempts int
}

func (e *APIError) Error() string {
	var fix string
	switch {
	case e.Status == 0:
		fix = "the scheduling API could not be reached: check scheduling.base_url and the network"
	case e.Status == http.StatusUnauthorized:
		fix = "the API refused a freshly refreshed access token: run `syncd auth login` again"
	case e.Status == http.StatusForbidden:
		fix = "the user may lack access to this resource: check the account that ran `syncd auth login`"
	case e.Status == http.StatusNotFound:
		fix = "check scheduling.base_url (the API root, e.g. https://api.cal.com)"
	case e.Status == http.StatusTooManyRequests:
		fix = "rate limited: another client may share this OAuth client, or scheduling.rate_limit is above the account's"
	case e.Status >= 500:
		fix = "the scheduling API is failing: the next pass retries"
	default:
		fix = "syncd sent a request the API does not accept: report it"
	}
	m := e.Message
	if m == "" {
		m = "no message"
	}
	at := ""
	if e.Attempts > 1 {
		at = fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return fmt.Sprintf("%s failed%s (HTTP %d: %s): %s", e.Endpoint, at, e.Status, m, fix)
}

// As makes errors.As(err, &*source.Error) find a refused token (401,
// 403), a missing resource (404), a service that kept answering 429 or
// kept failing (5xx, no answer) as the source contract's kinds; a request
// refused otherwise is no kind it knows.
func (e *APIError) As(target any) bool {
	p, ok := target.(**source.Error)
	if !ok {
		return false
	}
	var k source.Kind
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		k = source.Auth
	case http.StatusNotFound:
		k = source.NotFound
	case http.StatusTooManyRequests:
		k = source.RateLimited
	default:
		if e.Status != 0 && e.Status < 500 {
			return false
		}
		k = source.Unavailable
	}
	*p = &source.Error{Kind: k, Source: Name, Where: e.Endpoint, Status: e.Status, Err: e}
	return true
}

// DecodeError is a 2xx answer that could not be read.
type DecodeError struct {
	Endpoint string
	Err      error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode response of %s: %v", e.Endpoint, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// get runs one GET with the API's judge; decode reads a 2xx body.
func (c *Client) get(ctx context.Context, path, route, scope string, q url.Values, decode func([]byte) error) error {
	return c.call(ctx, &httpapi.Request{Method: http.MethodGet, Path: path, Route: route, Query: q}, scope, decode)
}

// call runs one request with the API's judge; decode reads a 2xx body.
// On the webhook endpoints every 403 is a missing scope: they have no
// other refusal for the user's own webhooks.
//
// hide are what the request sent that must never reach an error or a log
// (a webhook's secret and URL): a service may echo them in its message.
func (c *Client) call(ctx context.Context, r *httpapi.Request, scope string, decode func([]byte) error, hide ...string) error {
	r.Header = http.Header{"Cal-Api-Version": {APIVersion}}
	r.WaitKey = r.Route
	route := r.Route
	webhooks := strings.Contains(route, "/v2/webhooks")
	// One refresh per call, spent on the first 401 whatever attempt met it
	// (a transient failure before must not use it up); a token refused
	// again after its refresh means a new login, not another refresh.
	refreshed := false
	err := c.api.Do(ctx, r, func(r *httpapi.Request, res *httpapi.Response, attempt int) httpapi.Verdict {
		ep := r.Endpoint()
		// The access token the attempt sent is hidden too: a service or a
		// proxy may echo the request's headers.
		hide := hide
		if res.Credential != "" {
			hide = append(slices.Clip(hide), res.Credential)
		}
		switch s := res.Status; {
		case res.Err != nil:
			return httpapi.Verdict{Err: &APIError{Endpoint: ep, Attempts: attempt, Message: res.Err.Error()}, Retry: !httpapi.PermanentNetError(res.Err)}
		case s >= 200 && s < 300:
			if res.TooLarge {
				return httpapi.Verdict{Err: &DecodeError{Endpoint: ep, Err: fmt.Errorf("body exceeds %d bytes", c.api.MaxBodyBytes())}}
			}
			if res.ReadErr != nil {
				return httpapi.Verdict{Err: &DecodeError{Endpoint: ep, Err: res.ReadErr}, Retry: true}
			}
			if err := decode(res.Body); err != nil {
				var be *BookingError
				return httpapi.Verdict{Err: &DecodeError{Endpoint: ep, Err: err}, Retry: !errors.As(err, &be)}
			}
			return httpapi.Verdict{}
		case s == http.StatusUnauthorized || s == 498:
			// Expired or revoked before its time: one refresh, one retry.
			if t, err := c.tokens.Token(ctx); err == nil {
				c.tokens.Invalidate(t.AccessToken)
			}
			retry := !refreshed
			refreshed = true
			return httpapi.Verdict{Err: &APIError{Endpoint: ep, Status: s, Attempts: attempt, Message: httpapi.ServerMessage(res.Body, hide...)}, Retry: retry, Refreshed: retry}
		case s == http.StatusForbidden:
			msg := httpapi.ServerMessage(res.Body, hide...)
			if oauth.IsScopeRefusal(msg) || webhooks {
				var granted []string
				if t, err := c.tokens.Token(ctx); err == nil {
					granted = t.Scopes
				}
				return httpapi.Verdict{Err: oauth.NewScopeError(route, scope, granted, msg)}
			}
			return httpapi.Verdict{Err: &APIError{Endpoint: ep, Status: s, Message: msg}}
		case httpapi.TransientStatus(s):
			v := httpapi.Verdict{Err: &APIError{Endpoint: ep, Status: s, Attempts: attempt, Message: httpapi.ServerMessage(res.Body, hide...)}, Retry: true}
			v.RetryAfter, v.HasRetryAfter = c.api.RetryAfter(res.Header)
			return v
		default:
			return httpapi.Verdict{Err: &APIError{Endpoint: ep, Status: s, Message: httpapi.ServerMessage(res.Body, hide...)}}
		}
	})
	var afe *httpapi.AuthFailedError
	if errors.As(err, &afe) {
		return afe.Err // the token source's own sentence (e.g. run syncd auth login again)
	}
	return err
}

// envelope is the API's {status, data, pagination} answer.
type envelope struct {
	Status     string          `json:"status"`
	Data       json.RawMessage `json:"data"`
	Pagination *Pagination     `json:"pagination"`
}

// Pagination is the pagination object of a list answer.
type Pagination struct {
	TotalItems      int  `json:"totalItems"`
	RemainingItems  int  `json:"remainingItems"`
	ReturnedItems   int  `json:"returnedItems"`
	ItemsPerPage    int  `json:"itemsPerPage"`
	CurrentPage     int  `json:"currentPage"`
	TotalPages      int  `json:"totalPages"`
	HasNextPage     bool `json:"hasNextPage"`
	HasPreviousPage bool `json:"hasPreviousPage"`
}

// Me is the authorized user (GET /v2/me).
type Me struct {
	ID       int64   `json:"id"`
	Username string  `json:"username"`
	Email    string  `json:"email"`
	Name     *string `json:"name"`
	TimeZone string  `json:"timeZone"`
	OrgID    *int64  `json:"organizationId"`
}

// Me returns the authorized user; it needs PROFILE_READ.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var me Me
	err := c.get(ctx, "/v2/me", RouteMe, ScopeProfileRead, nil, func(b []byte) error {
		var env envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return err
		}
		if err := json.Unmarshal(env.Data, &me); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		if me.ID == 0 {
			return errors.New("data has no user id")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &me, nil
}

// ListParams is GET /v2/bookings' query; zero values are left out.
type ListParams struct {
	Take, Skip                      int
	AfterUpdatedAt, BeforeUpdatedAt *time.Time
	AfterCreatedAt, BeforeCreatedAt *time.Time
	SortUpdatedAt, SortCreated      string // asc or desc
	Statuses                        []string
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (p ListParams) query() (url.Values, error) {
	if p.Take < 0 || p.Take > MaxTake || p.Skip < 0 {
		return nil, fmt.Errorf("take %d must be 0..%d and skip %d not negative", p.Take, MaxTake, p.Skip)
	}
	q := url.Values{}
	if p.Take > 0 {
		q.Set("take", strconv.Itoa(p.Take))
	}
	if p.Skip > 0 {
		q.Set("skip", strconv.Itoa(p.Skip))
	}
	for k, t := range map[string]*time.Time{"afterUpdatedAt": p.AfterUpdatedAt, "beforeUpdatedAt": p.BeforeUpdatedAt, "afterCreatedAt": p.AfterCreatedAt, "beforeCreatedAt": p.BeforeCreatedAt} {
		if t != nil {
			q.Set(k, stamp(*t))
		}
	}
	if p.SortUpdatedAt != "" {
		q.Set("sortUpdatedAt", p.SortUpdatedAt)
	}
	if p.SortCreated != "" {
		q.Set("sortCreated", p.SortCreated)
	}
	if len(p.Statuses) > 0 {
		q.Set("status", strings.Join(p.Statuses, ","))
	}
	return q, nil
}

// BookingPage is one page of GET /v2/bookings.
type BookingPage struct {
	Bookings   []*Booking
	Pagination Pagination
}

// ListBookings fetches one page; it needs BOOKING_READ.
func (c *Client) ListBookings(ctx context.Context, p ListParams) (*BookingPage, error) {
	q, err := p.query()
	if err != nil {
		return nil, fmt.Errorf("list bookings: %w", err)
	}
	var out *BookingPage
	err = c.get(ctx, "/v2/bookings", RouteBookings, ScopeBookingRead, q, func(b []byte) error {
		var env envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return err
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(env.Data, &raws); err != nil {
			return fmt.Errorf("data is not a list: %w", err)
		}
		if raws == nil {
			// A page with no bookings says data: []. Read as empty, a
			// missing list would commit its window without its bookings.
			return errors.New("data is missing or null, not a list of bookings")
		}
		page := &BookingPage{Bookings: make([]*Booking, 0, len(raws))}
		if env.Pagination != nil {
			page.Pagination = *env.Pagination
		}
		for _, raw := range raws {
			bk, err := DecodeBooking(raw)
			if err != nil {
				return err
			}
			page.Bookings = append(page.Bookings, bk)
		}
		out = page
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Changes calls fn once for every booking whose current version time
// (updatedAt, or createdAt when null) lies in [start, end), in order of
// version time within each of the two walks (updatedAt, then the null-
// updatedAt rows by createdAt). end should be at least a safety lag in the
// past. Each booking version is passed once.
func (c *Client) Changes(ctx context.Context, start, end time.Time, fn func(*Booking) error) error {
	if !start.Before(end) {
		return nil
	}
	seen := map[string]time.Time{}
	emit := func(b *Booking) error {
		vt := b.VersionTime()
		if vt.Before(start) || !vt.Before(end) {
			return nil
		}
		if prev, ok := seen[b.UID]; ok && prev.Equal(vt) {
			return nil
		}
		seen[b.UID] = vt
		return fn(b)
	}
	byUpdated := func(cursor time.Time) ListParams {
		return ListParams{AfterUpdatedAt: &cursor, BeforeUpdatedAt: &end, SortUpdatedAt: "asc", Statuses: AllStatuses}
	}
	if err := c.walk(ctx, start, byUpdated, func(b *Booking) (time.Time, bool) {
		if b.UpdatedAt == nil {
			return time.Time{}, false
		}
		return *b.UpdatedAt, true
	}, emit); err != nil {
		return fmt.Errorf("bookings updated in [%s, %s): %w", stamp(start), stamp(end), err)
	}
	byCreated := func(cursor time.Time) ListParams {
		return ListParams{AfterCreatedAt: &cursor, BeforeCreatedAt: &end, SortCreated: "asc", Statuses: AllStatuses}
	}
	err := c.walk(ctx, start, byCreated, func(b *Booking) (time.Time, bool) { return b.CreatedAt, true }, func(b *Booking) error {
		if b.UpdatedAt != nil {
			return nil // the updatedAt walk has it
		}
		return emit(b)
	})
	if err != nil {
		return fmt.Errorf("bookings created in [%s, %s) and never updated: %w", stamp(start), stamp(end), err)
	}
	return nil
}

// walk pages through a time-sorted listing by keyset: each page starts at
// the last cursor time seen (the filter is inclusive) and skips the
// bookings already seen at exactly that time, less MaxTake/2 of them, which
// it reads again and drops by uid. A booking seen at that time that leaves
// meanwhile shifts the tied rows after it one place earlier: re-reading
// MaxTake/2 tolerates that many departures between two pages, where
// skipping all seen would hide one unseen booking per departure. A full
// page still brings at least MaxTake/2 rows not seen, so the walk advances
// through any number of ties.
func (c *Client) walk(ctx context.Context, start time.Time, params func(time.Time) ListParams, key func(*Booking) (time.Time, bool), emit func(*Booking) error) error {
	cursor := start
	tied := map[string]bool{} // uids seen at exactly cursor
	for {
		p := params(cursor)
		p.Take, p.Skip = MaxTake, max(0, len(tied)-MaxTake/2)
		page, err := c.ListBookings(ctx, p)
		if err != nil {
			return err
		}
		progress := false
		for _, b := range page.Bookings {
			k, ok := key(b)
			if !ok {
				continue
			}
			switch {
			case k.After(cursor):
				cursor, tied = k, map[string]bool{b.UID: true}
			case k.Equal(cursor):
				if tied[b.UID] {
					continue
				}
				tied[b.UID] = true
			}
			progress = true
			if err := emit(b); err != nil {
				return err
			}
		}
		// A short page ends the walk unless the service says more follow:
		// one that serves fewer than take a page would otherwise end it
		// early, and the window would be committed without the rest.
		if len(page.Bookings) < p.Take && !page.Pagination.HasNextPage {
			return nil
		}
		if !progress {
			return fmt.Errorf("a page at %s brought no booking not seen already, and more follow: the API ignores skip or the sort", stamp(cursor))
		}
	}
}
