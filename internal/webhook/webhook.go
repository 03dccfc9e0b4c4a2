// Package webhook is `syncd run`'s webhook receiver: a doorbell, not a
// second data path. A delivery is authenticated (by its source's
// Endpoint: a path token, a signature of the body), bounded in size and
// decoded, and then it only rings the Bell of its stream: the pass that
// follows fetches through the API and commits through the exactly-once
// path, as a scheduled pass does. The delivery's body is never written
// anywhere, so a forged, duplicated, lost or reordered delivery can cost a
// request, never a wrong row.
//
// The receiver knows no source: each source that takes deliveries gives
// its Endpoint (internal/source's Endpoints capability).
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PathPrefix is where the receiver serves (server.addr): a source's
// deliveries come under PathPrefix + its name + "/".
const PathPrefix = "/webhooks/"

// Stream is what a delivery rings for: a stream of an account's source
// (Stream is "" when the delivery names the account's only one).
type Stream struct {
	Account, Source, Stream string
}

// Endpoint is one source's side of the receiver: the shape of its
// delivery paths, how a delivery is authenticated and what it says.
type Endpoint interface {
	// Source names the source: its deliveries come under
	// PathPrefix + Source() + "/".
	Source() string
	// Segments is how many path segments follow the source's name.
	Segments() int
	// Route is the account and stream the path's (unescaped) segments
	// name, once what the path itself carries (a token) is authentic. Not
	// ok is answered 404, as an unknown path is: a guessed path learns
	// nothing.
	Route(secret []byte, segs []string) (account, stream string, ok bool)
	// Decode reads an authentic delivery of stream. Its error's message
	// is the 400's answer (it says what the body is not, never its
	// content).
	Decode(stream string, body []byte) (Delivery, error)
}

// Signed is an Endpoint whose deliveries carry a signature of their body:
// the body is read (bounded) before anything else is looked at, and a
// delivery Verify refuses is answered 401.
type Signed interface {
	Endpoint
	Verify(secret []byte, account string, h http.Header, body []byte) bool
	// SignatureHeader names the header the signature comes in (for the
	// 401's answer).
	SignatureHeader() string
}

// Delivery is what an authentic delivery says.
type Delivery struct {
	// Announced is the time of the record the delivery announces (zero:
	// none, or one that does not move the stream's windows).
	Announced time.Time
	// Ignore, when set, says why the delivery changes no record (a ping):
	// it is taken, and rings nothing.
	Ignore string
}

// Derive is HMAC-SHA256(secret, parts joined by NUL), hex: every token and
// signing secret a source gives its service comes from the one configured
// secret, so none is stored, and one that leaks names one stream (or one
// user's webhook), nothing more.
func Derive(secret []byte, parts ...string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(mac.Sum(nil))
}

// URL is the URL of a source's deliveries at publicURL, with the path
// segments after the source's name (escaped here).
func URL(publicURL, source string, segs ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(publicURL, "/") + PathPrefix + source)
	for _, s := range segs {
		b.WriteString("/" + url.PathEscape(s))
	}
	return b.String()
}
