package webhook

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// readTimeout bounds the reading of a delivery's body.
const readTimeout = 10 * time.Second

// Presence is what this replica knows of a delivery's stream.
type Presence int

const (
	// Unknown: no configured account has this stream (a removed form, a
	// mistyped or forged path).
	Unknown Presence = iota
	// Elsewhere: a configured stream that another replica syncs (a shared
	// state): the delivery is authentic, and this replica does nothing.
	Elsewhere
	// Here: this replica syncs the stream; the delivery rings its bell.
	Here
)

// Outcomes of a delivery, as syncd_webhook_deliveries_total counts them.
const (
	OutcomeAccepted       = "accepted"
	OutcomeDebounced      = "debounced"
	OutcomeIgnored        = "ignored"
	OutcomeRefusedAuth    = "refused_auth"
	OutcomeRefusedSize    = "refused_size"
	OutcomeRefusedBody    = "refused_body"
	OutcomeRefusedUnknown = "refused_unknown"
)

// Receiver answers the deliveries under PathPrefix. Its answers:
//   - 202 once a delivery is authentic, whole and decoded: the services
//     do not retry, so 2xx is said once, for a delivery taken (rung, merged
//     into a pass already due, or authentic but another replica's);
//   - 404 for a path that names no form or account syncd knows, or a forms
//     path token that does not match (the same answer: a guessed path
//     learns nothing);
//   - 401 for a scheduling delivery whose signature is missing or wrong;
//   - 413 for a body over MaxBody (read no further), 400 for a body that is
//     not a delivery, 405 for a method other than POST.
//
// A refused delivery writes nothing and rings nothing.
type Receiver struct {
	// Secret is sync.webhooks.secret: every token and signing secret
	// derives from it.
	Secret  []byte
	MaxBody int64
	// Lookup says where a stream is synced. For a form, Stream is its id.
	Lookup func(s Stream) Presence
	// Ring asks for a pass of s covering what arrived at at, a record of
	// time announced (zero: the delivery names none); it reports whether a
	// pass already due covers it.
	Ring    func(s Stream, at, announced time.Time) (debounced bool)
	Observe func(source, outcome string)
	Now     func() time.Time
	Log     *zap.Logger
}

// bookingTriggers are the scheduling events that change a booking.
var bookingTriggers = map[string]bool{
	"BOOKING_CREATED": true, "BOOKING_RESCHEDULED": true, "BOOKING_CANCELLED": true,
	"BOOKING_REQUESTED": true, "BOOKING_REJECTED": true, "BOOKING_PAYMENT_INITIATED": true,
	"BOOKING_PAID": true, "BOOKING_NO_SHOW_UPDATED": true,
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := rc.now()
	// A delivery is small: a client that trickles its body is cut off
	// (the server itself has no read timeout, for /status and /metrics).
	// Set before any refusal: the server reads what a refused request
	// left unread before it answers, and would wait on a stalled body.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readTimeout))
	source, parts, ok := splitPath(r.URL)
	if !ok {
		// A path under /webhooks/ that is neither source's: counted under
		// no source of its own, so a scan cannot add series.
		rc.refuse(w, "unknown", OutcomeRefusedUnknown, http.StatusNotFound, "no such webhook")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rc.refuse(w, source, OutcomeRefusedBody, http.StatusMethodNotAllowed, "deliveries are POSTed")
		return
	}
	switch source {
	case SourceForms:
		rc.forms(w, r, parts, at)
	default:
		rc.scheduling(w, r, parts, at)
	}
}

// splitPath is the source and the unescaped segments after it:
// forms/{account}/{form}/{token} or scheduling/{account}.
func splitPath(u *url.URL) (string, []string, bool) {
	rest, ok := strings.CutPrefix(u.EscapedPath(), PathPrefix)
	if !ok {
		return "", nil, false
	}
	segs := strings.Split(rest, "/")
	want := map[string]int{SourceForms: 4, SourceScheduling: 2}[segs[0]]
	if want == 0 || len(segs) != want {
		return "", nil, false
	}
	out := make([]string, 0, len(segs)-1)
	for _, s := range segs[1:] {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" {
			return "", nil, false
		}
		out = append(out, v)
	}
	return segs[0], out, true
}

func (rc *Receiver) forms(w http.ResponseWriter, r *http.Request, parts []string, at time.Time) {
	account, formID, token := parts[0], parts[1], parts[2]
	want := FormToken(rc.Secret, account, formID)
	if !hmac.Equal([]byte(token), []byte(want)) {
		rc.refuse(w, SourceForms, OutcomeRefusedAuth, http.StatusNotFound, "no such webhook")
		return
	}
	s := Stream{Account: account, Source: SourceForms, Stream: formID}
	where := rc.Lookup(s)
	if where == Unknown {
		rc.refuse(w, SourceForms, OutcomeRefusedUnknown, http.StatusNotFound, "no such webhook")
		return
	}
	body, ok := rc.read(w, r, SourceForms)
	if !ok {
		return
	}
	d, err := forms.DecodeWebhook(body)
	if err != nil {
		rc.refuse(w, SourceForms, OutcomeRefusedBody, http.StatusBadRequest, "not a submission delivery")
		return
	}
	if d.FormID != "" && d.FormID != formID {
		rc.refuse(w, SourceForms, OutcomeRefusedBody, http.StatusBadRequest, "the delivery is of another form")
		return
	}
	// The submission's time: an import may set one behind the checkpoint,
	// which the pass then re-reads. The time is only where to look; the
	// rows still come from the API.
	rc.take(w, s, where, at, d.Submission.SubmissionTime)
}

func (rc *Receiver) scheduling(w http.ResponseWriter, r *http.Request, parts []string, at time.Time) {
	account := parts[0]
	// The signature covers the body: it is read (bounded) first.
	body, ok := rc.read(w, r, SourceScheduling)
	if !ok {
		return
	}
	sig, err := hexSignature(r.Header.Get(SignatureHeader))
	if err != nil || !hmac.Equal(sig, []byte(Sign(SchedulingSecret(rc.Secret, account), body))) {
		rc.refuse(w, SourceScheduling, OutcomeRefusedAuth, http.StatusUnauthorized, "missing or wrong "+SignatureHeader)
		return
	}
	s := Stream{Account: account, Source: SourceScheduling}
	where := rc.Lookup(s)
	if where == Unknown {
		rc.refuse(w, SourceScheduling, OutcomeRefusedUnknown, http.StatusNotFound, "no such webhook")
		return
	}
	var d struct {
		TriggerEvent string          `json:"triggerEvent"`
		Payload      json.RawMessage `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil || d.TriggerEvent == "" || dec.More() {
		rc.refuse(w, SourceScheduling, OutcomeRefusedBody, http.StatusBadRequest, "not a booking delivery")
		return
	}
	if !bookingTriggers[d.TriggerEvent] {
		// A ping, or an event that changes no booking: authentic, no pass.
		rc.answer(w, SourceScheduling, OutcomeIgnored, "no pass for this event")
		return
	}
	if p := bytes.TrimSpace(d.Payload); len(p) == 0 || p[0] != '{' {
		rc.refuse(w, SourceScheduling, OutcomeRefusedBody, http.StatusBadRequest, "a booking delivery has a payload object")
		return
	}
	// No announced time: a booking's changes move the time its stream
	// windows by, so an incremental pass finds them.
	rc.take(w, s, where, at, time.Time{})
}

// hexSignature is the header's lowercase hex, with an optional sha256=
// prefix (as other services send it).
func hexSignature(h string) ([]byte, error) {
	h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(h), "sha256=")))
	if len(h) != 64 {
		return nil, errors.New("not a hex SHA-256")
	}
	if _, err := hex.DecodeString(h); err != nil {
		return nil, err
	}
	return []byte(h), nil
}

// read reads the body, at most MaxBody bytes; it has answered 413 when it
// reports false.
func (rc *Receiver) read(w http.ResponseWriter, r *http.Request, source string) ([]byte, bool) {
	if r.ContentLength > rc.MaxBody {
		rc.refuse(w, source, OutcomeRefusedSize, http.StatusRequestEntityTooLarge, fmt.Sprintf("a delivery is at most %d bytes", rc.MaxBody))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rc.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		rc.refuse(w, source, OutcomeRefusedSize, http.StatusRequestEntityTooLarge, fmt.Sprintf("a delivery is at most %d bytes", rc.MaxBody))
		return nil, false
	case err != nil:
		rc.refuse(w, source, OutcomeRefusedBody, http.StatusBadRequest, "the body could not be read")
		return nil, false
	}
	return body, true
}

// take answers an authentic, whole delivery: it rings its stream's bell
// when this replica syncs it.
func (rc *Receiver) take(w http.ResponseWriter, s Stream, where Presence, at, announced time.Time) {
	if where != Here {
		rc.answer(w, s.Source, OutcomeIgnored, "another replica syncs this account")
		return
	}
	if rc.Ring(s, at, announced) {
		rc.answer(w, s.Source, OutcomeDebounced, "a pass is already due")
		return
	}
	rc.answer(w, s.Source, OutcomeAccepted, "a pass is due")
}

func (rc *Receiver) answer(w http.ResponseWriter, source, outcome, msg string) {
	rc.observe(source, outcome)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, msg)
}

// refuse answers a delivery syncd does not take. The path (which may hold a
// token) and the body are never logged.
func (rc *Receiver) refuse(w http.ResponseWriter, source, outcome string, status int, msg string) {
	rc.observe(source, outcome)
	if rc.Log != nil {
		rc.Log.Debug("webhook delivery refused", zap.String("source", source), zap.String("outcome", outcome), zap.Int("status", status))
	}
	// What a refused request has not sent is not waited for: the
	// connection closes after the answer.
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}

func (rc *Receiver) observe(source, outcome string) {
	if rc.Observe != nil {
		rc.Observe(source, outcome)
	}
}

func (rc *Receiver) now() time.Time {
	if rc.Now != nil {
		return rc.Now()
	}
	return time.Now()
}
