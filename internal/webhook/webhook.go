// Package webhook is `syncd run`'s webhook receiver: a doorbell, not a
// second data path. A delivery is authenticated (a path token for the
// Forms API, an HMAC signature for the scheduling API), bounded in size
// and decoded, and then it only rings the Bell of its stream: the pass
// that follows fetches through the API and commits through the
// exactly-once path, as a scheduled pass does. The delivery's body is
// never written anywhere, so a forged, duplicated, lost or reordered
// delivery can cost a request, never a wrong row.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
)

// Sources, as the metrics and the poller name them.
const (
	SourceForms      = "forms"
	SourceScheduling = "scheduling"
)

// Paths under which the receiver serves (server.addr).
const (
	PathPrefix     = "/webhooks/"
	formsPath      = PathPrefix + SourceForms + "/"
	schedulingPath = PathPrefix + SourceScheduling + "/"
)

// SignatureHeader carries the scheduling API's lowercase hex
// HMAC-SHA256 of the raw body, keyed with the webhook's secret.
const SignatureHeader = "X-Cal-Signature-256"

// Stream is what a delivery rings for: one form of an account, or an
// account's bookings (Stream is then "").
type Stream struct {
	Account, Source, Stream string
}

// derive is HMAC-SHA256(secret, parts joined by NUL), hex: every token and
// signing secret comes from the one configured secret, so none is stored,
// and one that leaks names one form (or one user's webhook), nothing more.
func derive(secret []byte, parts ...string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(mac.Sum(nil))
}

// FormToken is the path token of a form's webhook.
func FormToken(secret []byte, account, formID string) string {
	return derive(secret, "forms path token", account, formID)[:40]
}

// SchedulingSecret is the signing secret syncd gives the scheduling API
// for an account's webhook.
func SchedulingSecret(secret []byte, account string) string {
	return derive(secret, "scheduling signing secret", account)
}

// FormsURL is the URL syncd registers for a form's webhook: it carries the
// form's path token, so it is never logged.
func FormsURL(publicURL string, secret []byte, account, formID string) string {
	return strings.TrimRight(publicURL, "/") + formsPath + url.PathEscape(account) + "/" +
		url.PathEscape(formID) + "/" + FormToken(secret, account, formID)
}

// SchedulingURL is the URL syncd registers for an account's bookings.
func SchedulingURL(publicURL, account string) string {
	return strings.TrimRight(publicURL, "/") + schedulingPath + url.PathEscape(account)
}

// Sign is the signature of body under the signing secret, as the
// scheduling API sends it.
func Sign(signingSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(signingSecret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
