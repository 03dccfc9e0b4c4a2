package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/webhook"
)

var testSecret = []byte("0123456789abcdef-test-secret")

const sub = `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","name":"Q","type":"ShortAnswer","value":"hi"}]}`

// recorder is a Receiver whose rings and outcomes are recorded.
type recorder struct {
	rings    []webhook.Stream
	outcomes map[string]int
}

func newReceiver(where map[webhook.Stream]webhook.Presence) (*webhook.Receiver, *recorder) {
	rec := &recorder{outcomes: map[string]int{}}
	return &webhook.Receiver{
		Secret: testSecret, MaxBody: 4096,
		Endpoints: []webhook.Endpoint{formsource.Endpoint{}, scheduling.Endpoint{}},
		Lookup:    func(s webhook.Stream) webhook.Presence { return where[s] },
		Ring:      func(s webhook.Stream, _, _ time.Time) bool { rec.rings = append(rec.rings, s); return false },
		Observe:   func(source, outcome string) { rec.outcomes[source+"/"+outcome]++ },
	}, rec
}

func TestReceiver(t *testing.T) {
	acme := webhook.Stream{Account: "acme", Source: "forms", Stream: "f1"}
	other := webhook.Stream{Account: "other", Source: "forms", Stream: "f9"}
	bookings := webhook.Stream{Account: "acme", Source: "scheduling"}
	where := map[webhook.Stream]webhook.Presence{acme: webhook.Here, other: webhook.Elsewhere, bookings: webhook.Here}
	formsURL := func(account, form string) string {
		u, _ := url.Parse(formsource.WebhookURL("http://syncd.test", testSecret, account, form))
		return u.Path
	}
	goodForm := formsURL("acme", "f1")
	booking := `{"triggerEvent":"BOOKING_CREATED","createdAt":"2024-01-01T10:00:00Z","payload":{"uid":"b1"}}`
	sign := func(body string) string {
		return scheduling.Sign(scheduling.SigningSecret(testSecret, "acme"), []byte(body))
	}
	big := `{"formId":"f1","submission":` + sub + `,"pad":"` + strings.Repeat("x", 5000) + `"}`

	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		sig     string // X-Cal-Signature-256; "" sends none
		chunked bool   // no Content-Length: the limit is found while reading
		status  int
		outcome string
		ring    *webhook.Stream
	}{
		{"forms envelope", "POST", goodForm, `{"formId":"f1","formName":"F","submission":` + sub + `}`, "", false, 202, "forms/accepted", &acme},
		{"forms bare submission", "POST", goodForm, sub, "", false, 202, "forms/accepted", &acme},
		{"forms bad token", "POST", strings.TrimSuffix(goodForm, goodForm[len(goodForm)-4:]) + "abcd", sub, "", false, 404, "forms/refused_auth", nil},
		{"forms token of another form", "POST", strings.Replace(formsURL("acme", "f2"), "/f2/", "/f1/", 1), sub, "", false, 404, "forms/refused_auth", nil},
		{"forms no token", "POST", "/webhooks/forms/acme/f1", sub, "", false, 404, "unknown/refused_unknown", nil},
		{"forms unknown form (valid token)", "POST", formsURL("acme", "gone"), sub, "", false, 404, "forms/refused_unknown", nil},
		{"forms unknown account (valid token)", "POST", formsURL("nobody", "f1"), sub, "", false, 404, "forms/refused_unknown", nil},
		{"forms another replica's account", "POST", formsURL("other", "f9"), sub, "", false, 202, "forms/ignored", nil},
		{"forms malformed JSON", "POST", goodForm, `{"formId":"f1","submission":`, "", false, 400, "forms/refused_body", nil},
		{"forms not a submission", "POST", goodForm, `{"hello":1}`, "", false, 400, "forms/refused_body", nil},
		{"forms delivery of another form", "POST", goodForm, `{"formId":"f2","submission":` + sub + `}`, "", false, 400, "forms/refused_body", nil},
		{"forms oversized (Content-Length)", "POST", goodForm, big, "", false, 413, "forms/refused_size", nil},
		{"forms oversized (chunked)", "POST", goodForm, big, "", true, 413, "forms/refused_size", nil},
		{"forms GET", "GET", goodForm, "", "", false, 405, "forms/refused_body", nil},
		{"scheduling signed", "POST", "/webhooks/scheduling/acme", booking, sign(booking), false, 202, "scheduling/accepted", &bookings},
		{"scheduling signed, sha256= prefix, upper case", "POST", "/webhooks/scheduling/acme", booking, "sha256=" + strings.ToUpper(sign(booking)), false, 202, "scheduling/accepted", &bookings},
		{"scheduling bad HMAC", "POST", "/webhooks/scheduling/acme", booking, sign(booking + " "), false, 401, "scheduling/refused_auth", nil},
		{"scheduling missing HMAC", "POST", "/webhooks/scheduling/acme", booking, "", false, 401, "scheduling/refused_auth", nil},
		{"scheduling signed for another account", "POST", "/webhooks/scheduling/acme", booking, scheduling.Sign(scheduling.SigningSecret(testSecret, "other"), []byte(booking)), false, 401, "scheduling/refused_auth", nil},
		{"scheduling malformed JSON (signed)", "POST", "/webhooks/scheduling/acme", `{"triggerEvent":`, sign(`{"triggerEvent":`), false, 400, "scheduling/refused_body", nil},
		{"scheduling no payload (signed)", "POST", "/webhooks/scheduling/acme", `{"triggerEvent":"BOOKING_CREATED"}`, sign(`{"triggerEvent":"BOOKING_CREATED"}`), false, 400, "scheduling/refused_body", nil},
		{"scheduling ping (signed)", "POST", "/webhooks/scheduling/acme", `{"triggerEvent":"PING","payload":{}}`, sign(`{"triggerEvent":"PING","payload":{}}`), false, 202, "scheduling/ignored", nil},
		{"scheduling oversized", "POST", "/webhooks/scheduling/acme", big, sign(big), true, 413, "scheduling/refused_size", nil},
		{"unknown source", "POST", "/webhooks/other/acme", sub, "", false, 404, "unknown/refused_unknown", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, rec := newReceiver(where)
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.chunked {
				req.ContentLength = -1
			}
			if tt.sig != "" {
				req.Header.Set(scheduling.SignatureHeader, tt.sig)
			}
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Errorf("status %d, want %d (%s)", w.Code, tt.status, strings.TrimSpace(w.Body.String()))
			}
			if len(rec.outcomes) != 1 || rec.outcomes[tt.outcome] != 1 {
				t.Errorf("outcomes %v, want one %s", rec.outcomes, tt.outcome)
			}
			switch {
			case tt.ring == nil && len(rec.rings) > 0:
				t.Errorf("rang %v for a delivery that must ring nothing", rec.rings)
			case tt.ring != nil && (len(rec.rings) != 1 || rec.rings[0] != *tt.ring):
				t.Errorf("rang %v, want once %v", rec.rings, *tt.ring)
			}
			if strings.Contains(w.Body.String(), formsource.WebhookToken(testSecret, "acme", "f1")) {
				t.Error("the answer repeats the path token")
			}
		})
	}
}

// TestTokensDiffer: a token names one form of one account, and depends on
// the secret.
func TestTokensDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, c := range []struct {
		secret        string
		account, form string
	}{{"s1-0123456789abcdef", "a", "f"}, {"s1-0123456789abcdef", "a", "g"}, {"s1-0123456789abcdef", "b", "f"}, {"s2-0123456789abcdef", "a", "f"}, {"s1-0123456789abcdef", "a\x00f", ""}} {
		tok := formsource.WebhookToken([]byte(c.secret), c.account, c.form)
		if prev, ok := seen[tok]; ok {
			t.Errorf("%v has the token of %s", c, prev)
		}
		seen[tok] = c.account + "/" + c.form
	}
	if scheduling.SigningSecret(testSecret, "a") == scheduling.SigningSecret(testSecret, "b") {
		t.Error("two accounts share a signing secret")
	}
}

// TestURLsRoundTrip: an account or form id with characters a path escapes
// reaches Lookup and Ring as configured.
func TestURLsRoundTrip(t *testing.T) {
	rc, rec := newReceiver(map[webhook.Stream]webhook.Presence{{Account: "a b/c", Source: "forms", Stream: "form/1"}: webhook.Here})
	u, _ := url.Parse(formsource.WebhookURL("https://x.test/base/", testSecret, "a b/c", "form/1"))
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+strings.SplitN(u.EscapedPath(), "/webhooks/", 2)[1], strings.NewReader(sub))
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != 202 || len(rec.rings) != 1 || rec.rings[0].Account != "a b/c" || rec.rings[0].Stream != "form/1" {
		t.Fatalf("status %d rings %v: an escaped account and form must round-trip", w.Code, rec.rings)
	}
}
