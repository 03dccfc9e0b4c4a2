package scheduling

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/syncd-dev/syncd/internal/webhook"
)

// Name is the scheduling source's name: the "scheduling/" of its stream
// keys, its results and its webhook paths.
const Name = "scheduling"

// SignatureHeader carries the scheduling API's lowercase hex
// HMAC-SHA256 of the raw body, keyed with the webhook's secret.
const SignatureHeader = "X-Cal-Signature-256"

// Endpoint is the scheduling API's side of the webhook receiver: one URL
// per account ({account}), each delivery signed with the account's
// signing secret (derived from the configured secret).
type Endpoint struct{}

var _ webhook.Signed = Endpoint{}

// Source is the scheduling source's name.
func (Endpoint) Source() string { return Name }

// Segments: the account.
func (Endpoint) Segments() int { return 1 }

// Route is the account the path names: the signature authenticates it.
func (Endpoint) Route(_ []byte, segs []string) (account, stream string, ok bool) {
	return segs[0], "", true
}

// SignatureHeader is the header the scheduling API signs in.
func (Endpoint) SignatureHeader() string { return SignatureHeader }

// Verify checks the body's signature under the account's signing secret.
func (Endpoint) Verify(secret []byte, account string, h http.Header, body []byte) bool {
	sig, err := hexSignature(h.Get(SignatureHeader))
	return err == nil && hmac.Equal(sig, []byte(Sign(SigningSecret(secret, account), body)))
}

// bookingChanges are the scheduling events that change a booking.
var bookingChanges = map[string]bool{
	"BOOKING_CREATED": true, "BOOKING_RESCHEDULED": true, "BOOKING_CANCELLED": true,
	"BOOKING_REQUESTED": true, "BOOKING_REJECTED": true, "BOOKING_PAYMENT_INITIATED": true,
	"BOOKING_PAID": true, "BOOKING_NO_SHOW_UPDATED": true,
}

// Decode reads a booking delivery. It announces no time: a booking's
// changes move the time its stream windows by, so an incremental pass
// finds them.
func (Endpoint) Decode(_ string, body []byte) (webhook.Delivery, error) {
	var d struct {
		TriggerEvent string          `json:"triggerEvent"`
		Payload      json.RawMessage `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil || d.TriggerEvent == "" || dec.More() {
		return webhook.Delivery{}, errors.New("not a booking delivery")
	}
	if !bookingChanges[d.TriggerEvent] {
		// A ping, or an event that changes no booking: authentic, no pass.
		return webhook.Delivery{Ignore: "no pass for this event"}, nil
	}
	if p := bytes.TrimSpace(d.Payload); len(p) == 0 || p[0] != '{' {
		return webhook.Delivery{}, errors.New("a booking delivery has a payload object")
	}
	return webhook.Delivery{}, nil
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

// SigningSecret is the signing secret syncd gives the scheduling API for
// an account's webhook.
func SigningSecret(secret []byte, account string) string {
	return webhook.Derive(secret, "scheduling signing secret", account)
}

// Sign is the signature of body under the signing secret, as the
// scheduling API sends it.
func Sign(signingSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(signingSecret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// WebhookURL is the URL syncd registers for an account's bookings.
func WebhookURL(publicURL, account string) string {
	return webhook.URL(publicURL, Name, account)
}
