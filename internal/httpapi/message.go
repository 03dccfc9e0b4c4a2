package httpapi

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret wherever a message might show it.
const Redacted = "[REDACTED]"

// ServerMessage extracts a human message from an error body: the "message"
// (or "error_description", or "error", a string or an object with a
// "message") of a JSON object, else the text itself. Every secret is removed
// first, in case the server or a proxy echoes request headers or a form
// body, then the text is flattened to one line and shortened.
func ServerMessage(body []byte, secrets ...string) string {
	var m struct {
		Message     json.RawMessage `json:"message"`
		Description json.RawMessage `json:"error_description"`
		Error       json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &m) == nil {
		msg = ScalarText(m.Message)
		if msg == "" {
			msg = ScalarText(m.Description)
		}
		if msg == "" {
			msg = ScalarText(m.Error)
		}
		if msg == "" {
			var nested struct {
				Message json.RawMessage `json:"message"`
			}
			if json.Unmarshal(m.Error, &nested) == nil {
				msg = ScalarText(nested.Message)
			}
		}
	}
	if msg == "" {
		msg = string(body)
	}
	return Scrub(msg, secrets...)
}

// Scrub removes every non-empty secret from s, flattens it to one line and
// shortens it to 300 runes.
func Scrub(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
	}), " ")
	const maxRunes = 300
	if utf8.RuneCountInString(s) > maxRunes {
		s = string([]rune(s)[:maxRunes]) + "…"
	}
	return s
}

// ScalarText renders a JSON string, number or boolean as text; anything else
// (absent, null, object, array) as "".
func ScalarText(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case float64, bool:
		return strings.TrimSpace(string(raw))
	}
	return ""
}

// ParseRetryAfter reads Retry-After as seconds or an HTTP date, capped at
// ceiling; false when absent or unreadable.
func ParseRetryAfter(h http.Header, now time.Time, ceiling time.Duration) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(ceiling/time.Second) {
			return ceiling, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), ceiling), true
	}
	return 0, false
}

// RequestNotSent reports whether err happened before the request could reach
// the server: the connection (or the proxy's) never opened.
func RequestNotSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// PermanentNetError reports transport failures that retrying cannot fix: an
// unknown host or a certificate that does not verify.
func PermanentNetError(err error) bool {
	var cert *tls.CertificateVerificationError
	return errors.As(err, &cert)
}
