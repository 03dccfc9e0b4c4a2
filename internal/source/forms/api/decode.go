package forms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	fastjson "github.com/goccy/go-json"

	"github.com/syncd-dev/syncd/internal/jsontext"
	"github.com/syncd-dev/syncd/internal/rfc3339"
)

// Decoding is done through wire types that shadow the strict fields of the
// shared models: timestamps arrive as raw JSON and go through parseTimestamp,
// and calculation and URL-parameter values accept any scalar. The models stay
// plain structs; nothing here changes how they marshal.
//
// Timestamps: any RFC 3339 form is accepted, plus the variants services and
// proxies are known to emit: a space instead of "T", an offset without colon
// ("+0000") or minutes ("+00"), and no zone at all. A zone-less timestamp is
// read as UTC because the service documents UTC everywhere. Everything is
// returned in UTC. Anything else is an error naming the field, never a panic.

// parseTimestamp parses one JSON timestamp value. present is false for a
// missing key, null or "".
func parseTimestamp(raw json.RawMessage) (t time.Time, present bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	if raw[0] != '"' {
		return time.Time{}, false, fmt.Errorf("want a timestamp string, got %.40s", raw)
	}
	// The service's own shape, read in place; anything else (and a year
	// inRange refuses) takes the general path below.
	if len(raw) >= 2 && raw[len(raw)-1] == '"' {
		if t, ok := rfc3339.Parse(raw[1 : len(raw)-1]); ok && yearInRange(t) {
			return t, true, nil
		}
	}
	s, ok := plainString(raw)
	if !ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, false, err
		}
	}
	if s == "" {
		return time.Time{}, false, nil
	}
	if t, err := ParseTime(s); err == nil {
		return inRange(s, t)
	}
	// Tried in order after RFC 3339; a fractional second after the seconds is
	// accepted by every layout.
	layouts := [...]string{
		"2006-01-02T15:04:05Z0700",
		"2006-01-02T15:04:05Z07",
		"2006-01-02 15:04:05Z07:00",
		"2006-01-02 15:04:05Z0700",
		"2006-01-02 15:04:05Z07",
		"2006-01-02T15:04:05",
		"2006-01-02 15:04:05",
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, s); err == nil {
			return inRange(s, t.UTC())
		}
	}
	return time.Time{}, false, fmt.Errorf("unrecognised timestamp %.64q (want RFC 3339)", s)
}

// plainString returns the text of a string literal without escapes, as
// json.Unmarshal would, without its reflection (timestamps are three per
// submission); false leaves anything else to it.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	plain := jsontext.PlainEnd(body, 0)
	if plain == len(body) { // printable ASCII
		return string(body), true
	}
	for _, c := range body[plain:] { // what precedes plain is plain
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// inRange refuses years that RFC 3339 cannot render: such a time would fail
// later, when a sink or checkpoint marshals it, far from its cause.
func inRange(s string, t time.Time) (time.Time, bool, error) {
	if !yearInRange(t) {
		return time.Time{}, false, fmt.Errorf("timestamp %.64q is out of range", s)
	}
	return t, true, nil
}

// yearInRange reports whether t's year is one a timestamp may have: 1-9999.
func yearInRange(t time.Time) bool {
	y := t.Year() // a calendar computation: once, on every timestamp's path
	return y >= 1 && y <= 9999
}

// scalarText renders a value documented as a string: a string as is, null as
// "", and any other JSON value as its JSON text, so that a number sent where a
// string was promised ("12.50" vs 12.5) is kept rather than failing the page.
func scalarText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		// Most values need no decoding; encoding/json, for those that do,
		// was a twentieth of a backfill's CPU when it took every value.
		if s, ok := plainString(raw); ok {
			return s
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

type wireCalculation struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type wireURLParameter struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// wireSubmission embeds Submission so fields added to the model later decode
// without changes here; the outer fields shadow the embedded ones of the same
// JSON name (encoding/json prefers the shallower field).
type wireSubmission struct {
	Submission
	SubmissionTime json.RawMessage    `json:"submissionTime"`
	LastUpdatedAt  json.RawMessage    `json:"lastUpdatedAt"`
	StartedAt      json.RawMessage    `json:"startedAt"`
	Calculations   []wireCalculation  `json:"calculations"`
	URLParameters  []wireURLParameter `json:"urlParameters"`
}

// submission converts w. When strict, a submission must carry submissionId
// and submissionTime: a listed row without them cannot be keyed or windowed,
// and dropping it silently would lose data.
func (w *wireSubmission) submission(strict bool) (Submission, error) {
	s := w.Submission
	// Only overwrite from raw values that were present, so that a decoder
	// added to Submission itself later keeps its result.
	t, ok, err := parseTimestamp(w.SubmissionTime)
	if err != nil {
		return s, fmt.Errorf("submissionTime: %w", err)
	}
	if ok {
		s.SubmissionTime = t
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **time.Time
	}{
		{"lastUpdatedAt", w.LastUpdatedAt, &s.LastUpdatedAt},
		{"startedAt", w.StartedAt, &s.StartedAt},
	} {
		t, ok, err := parseTimestamp(f.raw)
		if err != nil {
			return s, fmt.Errorf("%s: %w", f.name, err)
		}
		if ok {
			*f.dst = &t
		}
	}
	if w.Calculations != nil {
		s.Calculations = make([]Calculation, len(w.Calculations))
		for i, c := range w.Calculations {
			s.Calculations[i] = Calculation{ID: c.ID, Name: c.Name, Type: c.Type, Value: scalarText(c.Value)}
		}
	}
	if w.URLParameters != nil {
		s.URLParameters = make([]URLParameter, len(w.URLParameters))
		for i, p := range w.URLParameters {
			s.URLParameters[i] = URLParameter{ID: p.ID, Name: p.Name, Value: scalarText(p.Value)}
		}
	}
	if strict {
		if s.SubmissionID == "" {
			return s, errors.New("submissionId is missing")
		}
		if s.SubmissionTime.IsZero() {
			return s, errors.New("submissionTime is missing")
		}
	}
	return s, nil
}

// decodeSubmission decodes one submission object.
func decodeSubmission(raw []byte, strict bool) (Submission, error) {
	var w wireSubmission
	if err := json.Unmarshal(raw, &w); err != nil {
		return Submission{}, err
	}
	return w.submission(strict)
}

func convertSubmissions(field string, ws []wireSubmission, strict bool) ([]Submission, error) {
	if ws == nil {
		return nil, nil
	}
	out := make([]Submission, len(ws))
	for i := range ws {
		s, err := ws[i].submission(strict)
		if err != nil {
			if id := ws[i].SubmissionID; id != "" {
				return nil, fmt.Errorf("%s[%d] (submission %.64q): %w", field, i, id, err)
			}
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out[i] = s
	}
	return out, nil
}

// DecodeSubmissionPage decodes the body of GET /forms/{formId}/submissions.
// responses and totalResponses are required: a 200 without them (an error
// object, say) must not read as an empty window. responses may be null.
// Every listed submission must carry submissionId and submissionTime.
//
// Pages are the hot path of a sync, so they are decoded by scanPage, straight
// from the bytes, and when it declines (a shape the service does not send),
// with goccy/go-json, much faster than encoding/json here (bench/RESULTS.md).
// encoding/json stays the reference: only valid UTF-8 JSON takes the fast
// paths (goccy lets some invalid text through and keeps invalid UTF-8 that
// encoding/json replaces with U+FFFD), a body the fast decoders refuse is
// decoded again with encoding/json so that the error is its precise one,
// and a fuzz target checks that they agree on every input.
func DecodeSubmissionPage(body []byte) (*SubmissionPage, error) {
	return decodeSubmissionPage(body, nil)
}

// decodeSubmissionPage is DecodeSubmissionPage into bufs (nil: new memory).
func decodeSubmissionPage(body []byte, bufs *PageBuffers) (*SubmissionPage, error) {
	// The scanner validates as it decodes: a page it takes is valid UTF-8
	// JSON, and only a page it declines pays for a validation pass.
	if page, ok := scanPage(body, bufs); ok {
		return page, nil
	}
	if validUTF8JSON(body) { // utf8.Valid && json.Valid, in one pass
		if page, err := decodePageWith(body, fastjson.Unmarshal); err == nil {
			return page, nil
		}
	}
	return decodePageWith(body, json.Unmarshal)
}

// wirePage is a page as decoded. Presence of responses without a second
// pass over it: a missing key leaves the pointer and its nil slice
// untouched, null sets the pointer to nil, and an array (even []) makes the
// slice non-nil.
type wirePage struct {
	Responses      *[]wireSubmission `json:"responses"`
	TotalResponses *int              `json:"totalResponses"`
	PageCount      int               `json:"pageCount"`
}

func decodePageWith(body []byte, unmarshal func([]byte, any) error) (*SubmissionPage, error) {
	var responses []wireSubmission
	// An unnamed struct, as the errors have always named it
	// ("Go struct field .responses").
	w := struct {
		Responses      *[]wireSubmission `json:"responses"`
		TotalResponses *int              `json:"totalResponses"`
		PageCount      int               `json:"pageCount"`
	}{Responses: &responses}
	if err := unmarshal(body, &w); err != nil {
		return nil, err
	}
	return (*wirePage)(&w).page(responses)
}

// page checks a decoded page and converts its submissions; responses is
// the slice w.Responses was pointed at.
func (w *wirePage) page(responses []wireSubmission) (*SubmissionPage, error) {
	if w.Responses != nil && responses == nil {
		return nil, errors.New("responses is missing")
	}
	if w.TotalResponses == nil {
		return nil, errors.New("totalResponses is missing")
	}
	if *w.TotalResponses < 0 || w.PageCount < 0 {
		return nil, fmt.Errorf("negative totalResponses (%d) or pageCount (%d)", *w.TotalResponses, w.PageCount)
	}
	subs, err := convertSubmissions("responses", responses, true)
	if err != nil {
		return nil, err
	}
	return &SubmissionPage{Responses: subs, TotalResponses: *w.TotalResponses, PageCount: w.PageCount}, nil
}

// decodeSubmissionBody decodes GET /forms/{formId}/submissions/{id}:
// {"submission": {...}}, or a bare submission should the wrapper be missing.
func decodeSubmissionBody(body []byte) (*Submission, error) {
	var probe struct {
		Submission   json.RawMessage `json:"submission"`
		SubmissionID json.RawMessage `json:"submissionId"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, err
	}
	raw, field := probe.Submission, "submission"
	switch {
	case len(raw) > 0 && string(raw) != "null":
	case probe.SubmissionID != nil:
		raw, field = body, "body"
	default:
		return nil, errors.New("submission is missing")
	}
	s, err := decodeSubmission(raw, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return &s, nil
}

// DecodeWebhook decodes a webhook delivery. The service sends the envelope
// {"formId", "formName", "submission"}; the contract promises a bare
// submission. Both are accepted; for a bare one FormID and FormName are empty.
func DecodeWebhook(body []byte) (*WebhookDelivery, error) {
	var env struct {
		FormID       json.RawMessage `json:"formId"`
		FormName     string          `json:"formName"`
		Submission   json.RawMessage `json:"submission"`
		SubmissionID json.RawMessage `json:"submissionId"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("decode webhook delivery: %w", err)
	}
	switch {
	case len(env.Submission) > 0 && string(env.Submission) != "null":
		s, err := decodeSubmission(env.Submission, true)
		if err != nil {
			return nil, fmt.Errorf("decode webhook delivery: submission: %w", err)
		}
		return &WebhookDelivery{FormID: scalarText(env.FormID), FormName: env.FormName, Submission: s}, nil
	case env.SubmissionID != nil:
		s, err := decodeSubmission(body, true)
		if err != nil {
			return nil, fmt.Errorf("decode webhook delivery: %w", err)
		}
		return &WebhookDelivery{Submission: s}, nil
	default:
		return nil, errors.New("decode webhook delivery: neither {formId, formName, submission} nor a submission")
	}
}

// decodeCreated decodes the answer of POST /forms/{formId}/submissions. The
// contract leaves the required fields of created submissions open, so they
// are not checked for submissionId or submissionTime.
func decodeCreated(body []byte) ([]Submission, error) {
	var w struct {
		Submissions []wireSubmission `json:"submissions"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	return convertSubmissions("submissions", w.Submissions, false)
}

// decodeWebhookID reads {"id": 12345}; a numeric string is accepted too.
func decodeWebhookID(body []byte) (int64, error) {
	var w struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return 0, err
	}
	text := scalarText(w.ID)
	if text == "" {
		return 0, errors.New("id is missing")
	}
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("id %.40q is not an integer", text)
	}
	return id, nil
}

// transientDecodeError reports whether a decode failure looks like damage in
// transit (truncated or garbled bytes) rather than a shape the service really
// sends: only the former is worth another attempt.
func transientDecodeError(err error) bool {
	var syn *json.SyntaxError
	return errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF)
}
