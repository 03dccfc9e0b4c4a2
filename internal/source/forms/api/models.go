// Package forms is the client of the Forms API (see shared/spec/forms-api.md and
// forms-api-field-notes.md): typed models, every endpoint, one rate limiter per
// API key, retries with backoff and typed errors a caller can act on.
package forms

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// DateLayout is the one date format the service documents for query parameters:
// UTC with milliseconds. Parsing accepts any RFC 3339 form (see ParseTime).
const DateLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t the way the service expects it in a query.
func FormatTime(t time.Time) string { return t.UTC().Format(DateLayout) }

// ParseTime accepts any RFC 3339 timestamp, with or without fractional seconds.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// FormSummary is one entry of GET /forms.
type FormSummary struct {
	FormID string   `json:"formId"`
	Name   string   `json:"name"`
	Tags   []string `json:"tags,omitempty"`
}

// Field describes one question, calculation, URL parameter, scheduling or
// payment field in form metadata. Type is empty for URL parameters, scheduling
// and payment fields.
type Field struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// QuizSetting is present in metadata only when quiz mode is enabled.
type QuizSetting struct {
	Enabled bool `json:"enabled"`
}

// Form is the metadata of one form (GET /forms/{formId}).
type Form struct {
	ID            string       `json:"id"`
	Name          string       `json:"name"`
	Questions     []Field      `json:"questions"`
	Calculations  []Field      `json:"calculations,omitempty"`
	URLParameters []Field      `json:"urlParameters,omitempty"`
	Scheduling    []Field      `json:"scheduling,omitempty"`
	Payments      []Field      `json:"payments,omitempty"`
	Quiz          *QuizSetting `json:"quiz,omitempty"`
}

// Answer is one question's answer. Value stays raw JSON until the schema maps
// it: only a few value shapes are published, so the mapper decides.
type Answer struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// Calculation is one calculation's value; Value is always a string, even for
// the number type ("12.50").
type Calculation struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// URLParameter is one URL parameter captured with the submission.
type URLParameter struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SchedulingValue is the value object of a scheduling entry.
type SchedulingValue struct {
	FullName              string `json:"fullName,omitempty"`
	Email                 string `json:"email,omitempty"`
	Timezone              string `json:"timezone,omitempty"`
	EventStartTime        string `json:"eventStartTime,omitempty"`
	EventEndTime          string `json:"eventEndTime,omitempty"`
	EventID               string `json:"eventId,omitempty"`
	EventURL              string `json:"eventUrl,omitempty"`
	RescheduleOrCancelURL string `json:"rescheduleOrCancelUrl,omitempty"`
	UserID                *int64 `json:"userId,omitempty"`
	ScheduledUserEmail    string `json:"scheduledUserEmail,omitempty"`
	MeetingNotes          string `json:"meetingNotes,omitempty"`
}

// SchedulingEntry is one scheduling field's answer. Value stays raw so that a
// shape the mapper does not expect is kept rather than lost.
type SchedulingEntry struct {
	ID    string          `json:"id"`
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value"`
}

// PaymentValue is the value object of a payment entry.
type PaymentValue struct {
	PaymentID               string   `json:"paymentId,omitempty"`
	ProcessorCustomerID     string   `json:"processorCustomerId,omitempty"`
	ProcessorCustomerURL    string   `json:"processorCustomerUrl,omitempty"`
	ProcessorPaymentURL     string   `json:"processorPaymentUrl,omitempty"`
	TotalAmount             *float64 `json:"totalAmount,omitempty"`
	Currency                string   `json:"currency,omitempty"`
	Email                   string   `json:"email,omitempty"`
	DiscountCode            string   `json:"discountCode,omitempty"`
	Status                  string   `json:"status,omitempty"`
	ProcessorSubscriptionID string   `json:"processorSubscriptionId,omitempty"`
}

// PaymentEntry is one payment field's answer; Value stays raw like scheduling.
type PaymentEntry struct {
	ID    string          `json:"id"`
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value"`
}

// QuizResult is a submission's quiz outcome; the service may send {}.
type QuizResult struct {
	Score    *float64 `json:"score,omitempty"`
	MaxScore *float64 `json:"maxScore,omitempty"`
}

// Login carries the respondent's e-mail when the form requires login.
type Login struct {
	Email string `json:"email,omitempty"`
}

// Document is a generated document attached to a submission.
type Document struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Submission is one form response. Times are kept as the service sent them
// (parsed into time.Time); unknown keys are tolerated.
type Submission struct {
	SubmissionID   string            `json:"submissionId"`
	SubmissionTime time.Time         `json:"submissionTime"`
	LastUpdatedAt  *time.Time        `json:"lastUpdatedAt,omitempty"`
	StartedAt      *time.Time        `json:"startedAt,omitempty"`
	Questions      []Answer          `json:"questions"`
	Calculations   []Calculation     `json:"calculations,omitempty"`
	URLParameters  []URLParameter    `json:"urlParameters,omitempty"`
	Scheduling     []SchedulingEntry `json:"scheduling,omitempty"`
	Payments       []PaymentEntry    `json:"payments,omitempty"`
	Quiz           *QuizResult       `json:"quiz,omitempty"`
	Login          *Login            `json:"login,omitempty"`
	Documents      []Document        `json:"documents,omitempty"`
	EditLink       string            `json:"editLink,omitempty"`

	// ValuesChecked says that the decoder checked every raw value of
	// Questions, Scheduling and Payments to be one valid, compact JSON
	// value in valid UTF-8 (the page scanner does, as it reads), so that
	// the schema builder need not check them again. False is always safe.
	ValuesChecked bool `json:"-"`
}

// Clone is a deep copy of s. The submissions of a decoded page share that
// page's bytes and arrays, so one kept beyond its page is cloned first:
// the copy holds only its own.
func (s *Submission) Clone() Submission {
	c := *s
	c.SubmissionID = strings.Clone(s.SubmissionID)
	c.EditLink = strings.Clone(s.EditLink)
	c.LastUpdatedAt = clonePtr(s.LastUpdatedAt)
	c.StartedAt = clonePtr(s.StartedAt)
	c.Questions = cloneEach(s.Questions, func(a Answer) Answer { a.Value = bytes.Clone(a.Value); return a })
	c.Calculations = slices.Clone(s.Calculations)
	c.URLParameters = slices.Clone(s.URLParameters)
	c.Scheduling = cloneEach(s.Scheduling, func(e SchedulingEntry) SchedulingEntry { e.Value = bytes.Clone(e.Value); return e })
	c.Payments = cloneEach(s.Payments, func(e PaymentEntry) PaymentEntry { e.Value = bytes.Clone(e.Value); return e })
	c.Quiz = clonePtr(s.Quiz)
	c.Login = clonePtr(s.Login)
	c.Documents = slices.Clone(s.Documents)
	return c
}

// clonePtr is a pointer to a shallow copy of *p, nil for nil: for values
// that share nothing with the page (times, the quiz, the login).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneEach copies a slice (nil stays nil, empty stays empty) through
// clone, for elements that hold bytes of their own.
func cloneEach[T any](in []T, clone func(T) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = clone(v)
	}
	return out
}

// SubmissionPage is the body of GET /forms/{formId}/submissions.
type SubmissionPage struct {
	Responses      []Submission `json:"responses"`
	TotalResponses int          `json:"totalResponses"`
	PageCount      int          `json:"pageCount"`
}

// Status selects finished or in-progress submissions.
type Status string

const (
	StatusFinished   Status = "finished"
	StatusInProgress Status = "in_progress"
)

// SortOrder orders submissions by submission time.
type SortOrder string

const (
	SortAsc  SortOrder = "asc"
	SortDesc SortOrder = "desc"
)

// ListParams are the query parameters of GET /forms/{formId}/submissions.
// Zero values are not sent, so the service's defaults apply.
type ListParams struct {
	Limit           int        // 1..150; 0 means the service default (50)
	Offset          int        // 0 is not sent
	AfterDate       *time.Time // sent as afterDate in DateLayout
	BeforeDate      *time.Time // sent as beforeDate in DateLayout
	Status          Status     // empty: service default (finished)
	IncludePreview  bool       // sent as includePreview=true when set
	Sort            SortOrder  // empty: service default (asc)
	IncludeEditLink bool       // sent as includeEditLink=true when set
	Search          string     // sent as search when non-empty
	// Buffers, when set, is memory the page is read and decoded into,
	// reused from the last page listed with it: the caller must no longer
	// use that page's submissions (clone what it keeps). A walk through a
	// window reuses one for all its pages.
	Buffers *PageBuffers
}

// PageBuffers is the memory of one page at a time: its body and the arrays
// its submissions are carved from. The zero value is ready to use.
type PageBuffers struct {
	body []byte
	subs []Submission
	pageArrays
}

// NewSubmission is one item of POST /forms/{formId}/submissions.
type NewSubmission struct {
	Questions      []NewAnswer       `json:"questions,omitempty"`
	URLParameters  []URLParameter    `json:"urlParameters,omitempty"`
	SubmissionTime *time.Time        `json:"submissionTime,omitempty"`
	LastUpdatedAt  *time.Time        `json:"lastUpdatedAt,omitempty"`
	Scheduling     []SchedulingEntry `json:"scheduling,omitempty"`
	Payments       []PaymentEntry    `json:"payments,omitempty"`
}

// NewAnswer is a question answer in a create call.
type NewAnswer struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
}

// MaxCreateBatch is the most submissions one create call may carry.
const MaxCreateBatch = 10

// WebhookDelivery is what a webhook receives. The service wraps the submission
// in an envelope in practice, though the contract calls it a bare submission:
// DecodeWebhook accepts both.
type WebhookDelivery struct {
	FormID     string     `json:"formId,omitempty"`
	FormName   string     `json:"formName,omitempty"`
	Submission Submission `json:"submission"`
}
