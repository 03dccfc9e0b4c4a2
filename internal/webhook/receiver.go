package webhook

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
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
//   - 404 for a path that names no stream or account syncd knows, or a
//     path token that does not match (the same answer: a guessed path
//     learns nothing);
//   - 401 for a delivery of a Signed endpoint whose signature is missing
//     or wrong;
//   - 413 for a body over MaxBody (read no further), 400 for a body that is
//     not a delivery, 405 for a method other than POST.
//
// A refused delivery writes nothing and rings nothing.
type Receiver struct {
	// Secret is sync.webhooks.secret: every token and signing secret
	// derives from it.
	Secret  []byte
	MaxBody int64
	// Endpoints are the sources that take deliveries, one each.
	Endpoints []Endpoint
	// Lookup says where a stream is synced.
	Lookup func(s Stream) Presence
	// Ring asks for a pass of s covering what arrived at at, a record of
	// time announced (zero: the delivery names none); it reports whether a
	// pass already due covers it.
	Ring    func(s Stream, at, announced time.Time) (debounced bool)
	Observe func(source, outcome string)
	Now     func() time.Time
	Log     *zap.Logger
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := rc.now()
	// A delivery is small: a client that trickles its body is cut off
	// (the server itself has no read timeout, for /status and /metrics).
	// Set before any refusal: the server reads what a refused request
	// left unread before it answers, and would wait on a stalled body.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readTimeout))
	ep, parts, ok := rc.split(r.URL)
	if !ok {
		// A path under /webhooks/ that is no source's: counted under no
		// source of its own, so a scan cannot add series.
		rc.refuse(w, "unknown", OutcomeRefusedUnknown, http.StatusNotFound, "no such webhook")
		return
	}
	source := ep.Source()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rc.refuse(w, source, OutcomeRefusedBody, http.StatusMethodNotAllowed, "deliveries are POSTed")
		return
	}
	var body []byte
	signed, isSigned := ep.(Signed)
	if isSigned {
		// The signature covers the body: it is read (bounded) first.
		if body, ok = rc.read(w, r, source); !ok {
			return
		}
	}
	account, stream, ok := ep.Route(rc.Secret, parts)
	if !ok {
		rc.refuse(w, source, OutcomeRefusedAuth, http.StatusNotFound, "no such webhook")
		return
	}
	if isSigned && !signed.Verify(rc.Secret, account, r.Header, body) {
		rc.refuse(w, source, OutcomeRefusedAuth, http.StatusUnauthorized, "missing or wrong "+signed.SignatureHeader())
		return
	}
	s := Stream{Account: account, Source: source, Stream: stream}
	where := rc.Lookup(s)
	if where == Unknown {
		rc.refuse(w, source, OutcomeRefusedUnknown, http.StatusNotFound, "no such webhook")
		return
	}
	if !isSigned {
		if body, ok = rc.read(w, r, source); !ok {
			return
		}
	}
	d, err := ep.Decode(stream, body)
	if err != nil {
		rc.refuse(w, source, OutcomeRefusedBody, http.StatusBadRequest, err.Error())
		return
	}
	if d.Ignore != "" {
		rc.answer(w, source, OutcomeIgnored, d.Ignore)
		return
	}
	rc.take(w, s, where, at, d.Announced)
}

// split is the endpoint of the path's source and the unescaped segments
// after its name.
func (rc *Receiver) split(u *url.URL) (Endpoint, []string, bool) {
	rest, ok := strings.CutPrefix(u.EscapedPath(), PathPrefix)
	if !ok {
		return nil, nil, false
	}
	segs := strings.Split(rest, "/")
	i := slices.IndexFunc(rc.Endpoints, func(e Endpoint) bool { return e.Source() == segs[0] })
	if i < 0 || len(segs) != rc.Endpoints[i].Segments()+1 {
		return nil, nil, false
	}
	out := make([]string, 0, len(segs)-1)
	for _, s := range segs[1:] {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" {
			return nil, nil, false
		}
		out = append(out, v)
	}
	return rc.Endpoints[i], out, true
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
		rc.Log.Debug("webhook delivery refused", zap.String(logkey.Source, source), zap.String(logkey.Outcome, outcome), zap.Int(logkey.Status, status))
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
