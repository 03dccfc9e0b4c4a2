package forms

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

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// Route templates, as reported to the Observer and in debug logs.
const (
	RouteListForms        = "GET /forms"
	RouteGetForm          = "GET /forms/{formId}"
	RouteListSubmissions  = "GET /forms/{formId}/submissions"
	RouteGetSubmission    = "GET /forms/{formId}/submissions/{submissionId}"
	RouteCreateSubmission = "POST /forms/{formId}/submissions"
	RouteDeleteSubmission = "DELETE /forms/{formId}/submissions/{submissionId}"
	RouteCreateWebhook    = "POST /webhook/create"
	RouteDeleteWebhook    = "POST /webhook/delete"
)

func formNotFound(formID string) func(string) *NotFoundError {
	return func(base string) *NotFoundError {
		return &NotFoundError{What: "form", ID: formID, BaseURL: base}
	}
}

func endpointNotFound(ep string) func(string) *NotFoundError {
	return func(base string) *NotFoundError {
		return &NotFoundError{What: "endpoint", ID: ep, BaseURL: base}
	}
}

func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s id is empty", what)
	}
	return nil
}

// ListForms lists the forms the key can read (GET /forms, not paged).
func (c *Client) ListForms(ctx context.Context) ([]FormSummary, error) {
	r := &request{method: http.MethodGet, path: "/forms", route: RouteListForms, notFound: endpointNotFound("GET /forms")}
	var out []FormSummary
	err := c.do(ctx, r, func(b []byte) error {
		var fs []FormSummary
		if err := json.Unmarshal(b, &fs); err != nil {
			return err
		}
		out = fs
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetForm fetches a form's metadata.
func (c *Client) GetForm(ctx context.Context, formID string) (*Form, error) {
	if err := checkID("form", formID); err != nil {
		return nil, fmt.Errorf("get form: %w", err)
	}
	r := &request{
		method: http.MethodGet, path: "/forms/" + url.PathEscape(formID), route: RouteGetForm,
		notFound: formNotFound(formID),
	}
	var out *Form
	err := c.do(ctx, r, func(b []byte) error {
		var f Form
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		out = &f
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListSubmissions fetches one page of a form's submissions. Limit must be
// 0..MaxListLimit (0: the service default); nothing is sent otherwise.
func (c *Client) ListSubmissions(ctx context.Context, formID string, p ListParams) (*SubmissionPage, error) {
	if err := checkID("form", formID); err != nil {
		return nil, fmt.Errorf("list submissions: %w", err)
	}
	q, err := listQuery(p)
	if err != nil {
		return nil, fmt.Errorf("list submissions of form %s: %w", formID, err)
	}
	r := &request{
		method: http.MethodGet, path: "/forms/" + url.PathEscape(formID) + "/submissions", route: RouteListSubmissions,
		query: q, notFound: formNotFound(formID),
	}
	var out *SubmissionPage
	bufs := p.Buffers
	if bufs != nil {
		r.buffer = bufs.body
	}
	err = c.do(ctx, r, func(b []byte) error {
		if bufs != nil && cap(b) > cap(bufs.body) {
			bufs.body = b[:0] // grown for this page: the next reuses it
		}
		page, err := decodeSubmissionPage(b, bufs)
		if err != nil {
			return err
		}
		out = page
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listQuery turns p into the query the service documents; zero values are
// left out so the service's defaults apply.
func listQuery(p ListParams) (url.Values, error) {
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, fmt.Errorf("limit %d is outside 1..%d (0 means the service default)", p.Limit, MaxListLimit)
	}
	if p.Offset < 0 {
		return nil, fmt.Errorf("offset %d is negative", p.Offset)
	}
	switch p.Status {
	case "", StatusFinished, StatusInProgress:
	default:
		return nil, fmt.Errorf("status %q is neither %q nor %q", p.Status, StatusFinished, StatusInProgress)
	}
	switch p.Sort {
	case "", SortAsc, SortDesc:
	default:
		return nil, fmt.Errorf("sort %q is neither %q nor %q", p.Sort, SortAsc, SortDesc)
	}
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Offset > 0 {
		q.Set("offset", strconv.Itoa(p.Offset))
	}
	if p.AfterDate != nil && !p.AfterDate.IsZero() {
		q.Set("afterDate", FormatTime(*p.AfterDate))
	}
	if p.BeforeDate != nil && !p.BeforeDate.IsZero() {
		q.Set("beforeDate", FormatTime(*p.BeforeDate))
	}
	if p.Status != "" {
		q.Set("status", string(p.Status))
	}
	if p.IncludePreview {
		q.Set("includePreview", "true")
	}
	if p.Sort != "" {
		q.Set("sort", string(p.Sort))
	}
	if p.IncludeEditLink {
		q.Set("includeEditLink", "true")
	}
	if p.Search != "" {
		q.Set("search", p.Search)
	}
	return q, nil
}

// GetSubmission fetches one submission.
func (c *Client) GetSubmission(ctx context.Context, formID, submissionID string, includeEditLink bool) (*Submission, error) {
	if err := errors.Join(checkID("form", formID), checkID("submission", submissionID)); err != nil {
		return nil, fmt.Errorf("get submission: %w", err)
	}
	r := &request{
		method: http.MethodGet, route: RouteGetSubmission,
		path: "/forms/" + url.PathEscape(formID) + "/submissions/" + url.PathEscape(submissionID),
		notFound: func(base string) *NotFoundError {
			return &NotFoundError{What: "submission", ID: submissionID, FormID: formID, BaseURL: base}
		},
	}
	if includeEditLink {
		r.query = url.Values{"includeEditLink": {"true"}}
	}
	var out *Submission
	err := c.do(ctx, r, func(b []byte) error {
		s, err := decodeSubmissionBody(b)
		if err != nil {
			return err
		}
		out = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// wireNewSubmission is NewSubmission with its times in the documented
// layout (UTC, milliseconds) rather than Go's RFC 3339 with the local offset.
type wireNewSubmission struct {
	Questions      []NewAnswer       `json:"questions,omitempty"`
	URLParameters  []URLParameter    `json:"urlParameters,omitempty"`
	SubmissionTime string            `json:"submissionTime,omitempty"`
	LastUpdatedAt  string            `json:"lastUpdatedAt,omitempty"`
	Scheduling     []SchedulingEntry `json:"scheduling,omitempty"`
	Payments       []PaymentEntry    `json:"payments,omitempty"`
}

func formatOptional(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return FormatTime(*t)
}

// CreateSubmissions imports up to MaxCreateBatch submissions into a form and
// returns what the service created. More than MaxCreateBatch is refused
// before anything is sent; none is a no-op. The call is not retried once it
// may have reached the server (see request.mutating): an UnavailableError
// with Uncertain set means "check the form before importing again", and a
// DecodeError means the service accepted the batch but its answer was
// unreadable.
func (c *Client) CreateSubmissions(ctx context.Context, formID string, subs []NewSubmission) ([]Submission, error) {
	if err := checkID("form", formID); err != nil {
		return nil, fmt.Errorf("create submissions: %w", err)
	}
	if len(subs) > MaxCreateBatch {
		return nil, fmt.Errorf("create submissions in form %s: %d submissions exceed the %d one call may carry: split the batch",
			formID, len(subs), MaxCreateBatch)
	}
	if len(subs) == 0 {
		return nil, nil
	}
	wire := make([]wireNewSubmission, len(subs))
	for i, s := range subs {
		wire[i] = wireNewSubmission{
			Questions: s.Questions, URLParameters: s.URLParameters,
			SubmissionTime: formatOptional(s.SubmissionTime), LastUpdatedAt: formatOptional(s.LastUpdatedAt),
			Scheduling: s.Scheduling, Payments: s.Payments,
		}
	}
	body, err := json.Marshal(struct {
		Submissions []wireNewSubmission `json:"submissions"`
	}{wire})
	if err != nil {
		return nil, fmt.Errorf("create submissions in form %s: encode the request: %w", formID, err)
	}
	r := &request{
		method: http.MethodPost, path: "/forms/" + url.PathEscape(formID) + "/submissions", route: RouteCreateSubmission,
		body: body, mutating: true, notFound: formNotFound(formID),
	}
	var out []Submission
	err = c.do(ctx, r, func(b []byte) error {
		created, err := decodeCreated(b)
		if err != nil {
			return err
		}
		out = created
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSubmission deletes one submission. Like create it is not retried
// after it may have reached the server: a retried delete that already
// happened would answer 404 and hide the success.
func (c *Client) DeleteSubmission(ctx context.Context, formID, submissionID string) error {
	if err := errors.Join(checkID("form", formID), checkID("submission", submissionID)); err != nil {
		return fmt.Errorf("delete submission: %w", err)
	}
	r := &request{
		method: http.MethodDelete, route: RouteDeleteSubmission,
		path:     "/forms/" + url.PathEscape(formID) + "/submissions/" + url.PathEscape(submissionID),
		mutating: true,
		notFound: func(base string) *NotFoundError {
			return &NotFoundError{What: "submission", ID: submissionID, FormID: formID, BaseURL: base}
		},
	}
	return c.do(ctx, r, nil)
}

// CreateWebhook registers url to receive the form's submissions and returns
// the webhook id. The url is never put in errors or logs: it may carry the
// receiver's secret.
func (c *Client) CreateWebhook(ctx context.Context, formID, hookURL string) (int64, error) {
	if err := checkID("form", formID); err != nil {
		return 0, fmt.Errorf("create webhook: %w", err)
	}
	u, err := url.Parse(hookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return 0, fmt.Errorf("create webhook for form %s: the url must be an absolute http(s) URL", formID)
	}
	body, err := json.Marshal(struct {
		FormID string `json:"formId"`
		URL    string `json:"url"`
	}{formID, hookURL})
	if err != nil {
		return 0, fmt.Errorf("create webhook for form %s: encode the request: %w", formID, err)
	}
	r := &request{
		method: http.MethodPost, path: "/webhook/create", route: RouteCreateWebhook,
		body: body, mutating: true, notFound: formNotFound(formID),
		hide: hookURLRedactions(hookURL, u),
	}
	var id int64
	err = c.do(ctx, r, func(b []byte) error {
		v, err := decodeWebhookID(b)
		if err != nil {
			return err
		}
		id = v
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// minSecretPart is the least length of a path segment or query value
// hidden on its own from a server's message: a path token is far longer,
// while hiding every short segment ("in", an account name) would garble the
// message for nothing.
const minSecretPart = 16

// hookURLRedactions is what a server's message about a webhook URL must not
// show. The URL itself, as sent or normalised or escaped, becomes
// "<webhook url>", so the message still says what it is about; its path and
// query, and each part of them long enough to be a credential, become
// [REDACTED], in case the service echoes only a part or writes the URL its
// own way (a lower-cased host, JSON's escaped slashes in a raw body).
func hookURLRedactions(raw string, u *url.URL) []redaction {
	var hide []redaction
	add := func(with string, secrets ...string) {
		for _, s := range secrets {
			if s != "" {
				hide = append(hide, redaction{s, with})
			}
		}
	}
	add("<webhook url>", raw, u.String(), url.QueryEscape(raw), url.PathEscape(raw))
	add(httpapi.Redacted, u.RawQuery)
	if strings.Trim(u.Path, "/") != "" {
		add(httpapi.Redacted, u.RequestURI(), u.EscapedPath(), u.Path)
	}
	if pw, ok := u.User.Password(); ok {
		add(httpapi.Redacted, pw)
	}
	var parts []string
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		parts = append(parts, seg)
		if v, err := url.PathUnescape(seg); err == nil {
			parts = append(parts, v)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			parts = append(parts, v, url.QueryEscape(v))
		}
	}
	for _, p := range parts {
		if len(p) >= minSecretPart {
			add(httpapi.Redacted, p)
		}
	}
	// Longest first: a part replaced before the text that holds it would
	// leave the rest of that text in the message.
	slices.SortStableFunc(hide, func(a, b redaction) int { return len(b.secret) - len(a.secret) })
	return hide
}

// DeleteWebhook removes a webhook. The contract types webhookId as a string
// while the official clients send a number; the string goes first and, if
// the service refuses it with a 400, the number is tried once.
func (c *Client) DeleteWebhook(ctx context.Context, webhookID int64) error {
	if webhookID <= 0 {
		return fmt.Errorf("delete webhook: id %d is not a webhook id", webhookID)
	}
	idText := strconv.FormatInt(webhookID, 10)
	notFound := func(base string) *NotFoundError {
		return &NotFoundError{What: "webhook", ID: idText, BaseURL: base}
	}
	send := func(id any) error {
		body, err := json.Marshal(struct {
			WebhookID any `json:"webhookId"`
		}{id})
		if err != nil {
			return fmt.Errorf("delete webhook %d: encode the request: %w", webhookID, err)
		}
		r := &request{
			method: http.MethodPost, path: "/webhook/delete", route: RouteDeleteWebhook,
			body: body, mutating: true, notFound: notFound,
		}
		return c.do(ctx, r, nil)
	}
	err := send(idText)
	var bad *BadRequestError
	if errors.As(err, &bad) && bad.Status == http.StatusBadRequest {
		return send(webhookID)
	}
	return err
}
