package schedsim

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/simhook"
)

// calSink is a loopback subscriber that checks signatures as a receiver
// does: HMAC-SHA256 of the raw body with the secret it registered.
type calSink struct {
	url, secret string
	mu          sync.Mutex
	got         []calDelivery
}

type calDelivery struct {
	Trigger   string         `json:"triggerEvent"`
	CreatedAt string         `json:"createdAt"`
	Payload   map[string]any `json:"payload"`
	verified  bool
	sig       string
}

func newCalSink(t *testing.T, secret string) *calSink {
	t.Helper()
	k := &calSink{secret: secret}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var d calDelivery
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &d) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		d.sig = r.Header.Get(SignatureHeader)
		d.verified = d.sig == Sign(k.secret, b)
		k.mu.Lock()
		k.got = append(k.got, d)
		k.mu.Unlock()
		if !d.verified {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	k.url = srv.URL + "/webhooks/scheduling/acct"
	return k
}

func (k *calSink) deliveries() []calDelivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

// tokenFor authorizes the main client for username with scope and returns
// the access token.
func (h *harness) tokenFor(t *testing.T, username, scope string) string {
	t.Helper()
	if err := h.SetConsentingUser(username); err != nil {
		t.Fatal(err)
	}
	at, _ := h.exchange(t, h.code(t, h.Clients()[0].ID, scope), "http://127.0.0.1:9/cb")
	return at
}

func drainHooks(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.DrainWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
}

var booking3 = []string{TriggerBookingCreated, TriggerBookingRescheduled, TriggerBookingCancelled}

func hookBody(url, secret string, triggers ...string) map[string]any {
	b := map[string]any{"subscriberUrl": url, "triggers": triggers, "active": true}
	if secret != "" {
		b["secret"] = secret
	}
	return b
}

func TestWebhookEndpoints(t *testing.T) {
	h := newHarness(t, Config{Seed: 11, Bookings: 3, Users: []User{{Username: "ada"}, {Username: "bob"}}})
	t.Cleanup(func() { h.Close() })
	rw := h.tokenFor(t, "ada", "WEBHOOK_READ WEBHOOK_WRITE")
	ro := h.tokenFor(t, "ada", "WEBHOOK_READ")
	bookingsOnly := h.tokenFor(t, "ada", "BOOKING_READ")
	bob := h.tokenFor(t, "bob", "WEBHOOK_READ WEBHOOK_WRITE")
	const hookURL = "http://127.0.0.1:9/webhooks/scheduling/a"

	// Scopes: WEBHOOK_WRITE creates and deletes, WEBHOOK_READ lists.
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		msg                       string
	}{
		{"create without WEBHOOK_WRITE", "POST", PathWebhooks, ro, hookBody(hookURL, "", booking3...), 403, "Required: WEBHOOK_WRITE. Token has: WEBHOOK_READ"},
		{"list without WEBHOOK_READ", "GET", PathWebhooks, bookingsOnly, nil, 403, "Required: WEBHOOK_READ. Token has: BOOKING_READ"},
		{"no token", "GET", PathWebhooks, "nope", nil, 401, "Invalid Access Token."},
		{"no url", "POST", PathWebhooks, rw, map[string]any{"triggers": booking3, "active": true}, 400, "subscriberUrl"},
		{"relative url", "POST", PathWebhooks, rw, hookBody("/hook", "", booking3...), 400, "absolute http(s) URL"},
		{"unknown trigger", "POST", PathWebhooks, rw, hookBody(hookURL, "", "BOOKING_EXPLODED"), 400, "BOOKING_EXPLODED"},
		{"no active", "POST", PathWebhooks, rw, map[string]any{"subscriberUrl": hookURL, "triggers": booking3}, 400, "active must be a boolean"},
	} {
		st, body := h.call(t, tc.method, tc.path, tc.token, tc.body)
		msg, _ := body["error"].(map[string]any)["message"].(string)
		if st != tc.status || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, st, msg, tc.status, tc.msg)
		}
	}

	st, body := h.call(t, "POST", PathWebhooks, rw, hookBody(hookURL, "whsec_1", booking3...))
	data, _ := body["data"].(map[string]any)
	id, _ := data["id"].(string)
	if st != 201 || body["status"] != "success" || len(id) != 36 || data["subscriberUrl"] != hookURL || data["active"] != true ||
		data["secret"] != "whsec_1" || data["payloadTemplate"] != nil || data["userId"] != float64(h.Users()[0].ID) {
		t.Fatalf("create: %d %v", st, body)
	}
	if st, body := h.call(t, "POST", PathWebhooks, rw, hookBody(hookURL, "", TriggerBookingCreated)); st != 409 {
		t.Errorf("same url twice: %d %v", st, body)
	}
	// bob may register the same URL: uniqueness is per user.
	if st, _ := h.call(t, "POST", PathWebhooks, bob, hookBody(hookURL, "", TriggerBookingCreated)); st != 201 {
		t.Errorf("bob, same url: %d", st)
	}

	list := func(token string) []string {
		t.Helper()
		st, body := h.call(t, "GET", PathWebhooks, token, nil)
		items, ok := body["data"].([]any)
		if st != 200 || !ok {
			t.Fatalf("list: %d %v", st, body)
		}
		var ids []string
		for _, it := range items {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		return ids
	}
	if got := list(ro); !slices.Equal(got, []string{id}) {
		t.Errorf("ada's list %v, want [%s]", got, id)
	}
	if got := list(bob); len(got) != 1 || got[0] == id {
		t.Errorf("bob's list %v", got)
	}
	// Another user's webhook is forbidden, an unknown one not found.
	for _, tc := range []struct {
		method, path, token string
		status              int
	}{
		{"GET", PathWebhooks + "/" + id, bob, 403},
		{"DELETE", PathWebhooks + "/" + id, bob, 403},
		{"GET", PathWebhooks + "/" + id, ro, 200},
		{"DELETE", PathWebhooks + "/" + id, ro, 403},
		{"DELETE", PathWebhooks + "/" + id, rw, 200},
		{"DELETE", PathWebhooks + "/" + id, rw, 404},
		{"GET", PathWebhooks + "/" + id, ro, 404},
	} {
		if st, body := h.call(t, tc.method, tc.path, tc.token, nil); st != tc.status {
			t.Errorf("%s %s: %d %v, want %d", tc.method, tc.path, st, body, tc.status)
		}
	}
	if got := list(ro); len(got) != 0 {
		t.Errorf("after delete: %v", got)
	}
}

func TestWebhookDeliveriesSigned(t *testing.T) {
	h := newHarness(t, Config{Seed: 12, Bookings: 4, Users: []User{{Username: "ada"}, {Username: "bob"}}})
	t.Cleanup(func() { h.Close() })
	signed, unsigned, created, inactive := newCalSink(t, "whsec_right"), newCalSink(t, ""), newCalSink(t, "whsec_c"), newCalSink(t, "")
	ada := h.tokenFor(t, "ada", "WEBHOOK_WRITE")
	var createdID string
	for _, hk := range []struct {
		sink     *calSink
		triggers []string
		active   bool
	}{{signed, booking3, true}, {unsigned, booking3, true}, {created, []string{TriggerBookingCreated}, true}, {inactive, booking3, false}} {
		in := hookBody(hk.sink.url, hk.sink.secret, hk.triggers...)
		in["active"] = hk.active
		st, body := h.call(t, "POST", PathWebhooks, ada, in)
		if st != 201 {
			t.Fatalf("create: %d %v", st, body)
		}
		if hk.sink == created {
			createdID = body["data"].(map[string]any)["id"].(string)
		}
	}
	a, _ := h.ForUser("ada")
	b, _ := h.ForUser("bob")
	c := a.CreateBooking()
	b.CreateBooking() // bob has no webhook: nothing for ada's
	moved := a.Reschedule(c.UID, "clash")
	if !a.Cancel(moved, "ill") {
		t.Fatal("cancel")
	}
	drainHooks(t, h.Server)

	want := []struct{ trigger, uid, status string }{
		{TriggerBookingCreated, c.UID, "ACCEPTED"}, {TriggerBookingRescheduled, moved, "ACCEPTED"}, {TriggerBookingCancelled, moved, "CANCELLED"},
	}
	for _, tc := range []struct {
		name string
		sink *calSink
		n    int
		sig  func(string) bool
	}{
		{"with a secret", signed, 3, func(s string) bool { return len(s) == 64 && strings.ToLower(s) == s }},
		{"without a secret", unsigned, 3, func(s string) bool { return s == NoSecretSignature }},
		{"created only", created, 1, func(s string) bool { return len(s) == 64 }},
	} {
		got := tc.sink.deliveries()
		if len(got) != tc.n {
			t.Fatalf("%s: %d deliveries, want %d", tc.name, len(got), tc.n)
		}
		// Deliveries run in the background: compare them as a set.
		slices.SortFunc(got, func(x, y calDelivery) int { return strings.Compare(x.CreatedAt+x.Trigger, y.CreatedAt+y.Trigger) })
		for i, d := range got {
			w := want[i]
			p := d.Payload
			if !d.verified || !tc.sig(d.sig) || d.Trigger != w.trigger || p["uid"] != w.uid || p["status"] != w.status ||
				p["bookingId"] == nil || p["startTime"] == nil || p["endTime"] == nil {
				t.Errorf("%s: delivery %d = %s %v %v sig %q verified %t", tc.name, i, d.Trigger, p["uid"], p["status"], d.sig, d.verified)
			}
			if _, err := time.Parse(time.RFC3339Nano, d.CreatedAt); err != nil {
				t.Errorf("%s: createdAt %q", tc.name, d.CreatedAt)
			}
		}
		if tc.n == 3 && got[1].Payload["rescheduleUid"] != c.UID {
			t.Errorf("%s: rescheduled from %v, want %s", tc.name, got[1].Payload["rescheduleUid"], c.UID)
		}
	}
	// A signature made with another secret does not verify.
	body := []byte(`{"triggerEvent":"BOOKING_CREATED"}`)
	if Sign("whsec_right", body) == Sign("whsec_wrong", body) || Sign("whsec_right", body) != Sign("whsec_right", body) {
		t.Error("Sign does not depend on the secret alone")
	}
	if got := inactive.deliveries(); len(got) != 0 {
		t.Errorf("an inactive webhook got %d deliveries", len(got))
	}
	if st := h.WebhookStats(); st.Deliveries != 7 || st.Delivered != 7 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	// Deleted by its owner: nothing more.
	if st, body := h.call(t, "DELETE", PathWebhooks+"/"+createdID, ada, nil); st != 200 {
		t.Fatalf("delete: %d %v", st, body)
	}
	a.CreateBooking()
	drainHooks(t, h.Server)
	if got := created.deliveries(); len(got) != 1 {
		t.Errorf("a deleted webhook got %d deliveries more", len(got)-1)
	}
	if got := signed.deliveries(); len(got) != 4 {
		t.Errorf("the webhook left got %d deliveries, want 4", len(got))
	}
}

// Faults under a seed: drops, duplicates and forged signatures at their
// rates, as the receiver sees them.
func TestWebhookFaultRates(t *testing.T) {
	const n = 400
	for _, tc := range []struct {
		name   string
		faults simhook.Faults
	}{
		{"bad signature 25%", simhook.Faults{BadSignatureRate: 0.25}},
		{"drop 20% duplicate 20% delayed", simhook.Faults{DropRate: 0.2, DuplicateRate: 0.2, DelayMax: 3 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{Seed: 13, Bookings: 1, WebhookFaults: tc.faults})
			t.Cleanup(func() { h.Close() })
			sink := newCalSink(t, "whsec_x")
			if st, _ := h.call(t, "POST", PathWebhooks, h.tokenFor(t, "ada", "WEBHOOK_WRITE"), hookBody(sink.url, sink.secret, TriggerBookingCreated)); st != 201 {
				t.Fatal(st)
			}
			for range n {
				h.CreateBooking()
			}
			drainHooks(t, h.Server)
			st := h.WebhookStats()
			got := sink.deliveries()
			uids := map[string]int{}
			forged := map[string]bool{}
			for _, d := range got {
				uid := d.Payload["uid"].(string)
				uids[uid]++
				if !d.verified {
					forged[uid] = true
				}
			}
			f := tc.faults
			for _, r := range []struct {
				what  string
				got   int64
				total int64
				rate  float64
			}{
				{"dropped", st.Dropped, n, f.DropRate},
				{"duplicated", st.Duplicated, n - st.Dropped, f.DuplicateRate},
				{"bad signature", int64(len(forged)), n - st.Dropped, f.BadSignatureRate},
			} {
				sd := math.Sqrt(float64(r.total) * r.rate * (1 - r.rate))
				if math.Abs(float64(r.got)-r.rate*float64(r.total)) > 4.5*sd+0.5 {
					t.Errorf("%s: %d of %d at rate %v", r.what, r.got, r.total, r.rate)
				}
			}
			if int64(len(uids)) != n-st.Dropped || int64(len(got)) != st.Attempted || int64(len(forged)) != st.BadSignature ||
				st.Failed != int64(len(got))-st.Delivered {
				t.Errorf("stats %+v; receiver %d distinct, %d attempts, %d forged", st, len(uids), len(got), len(forged))
			}
		})
	}
}

// A registration the service forgot, or the owner deleted, gets nothing
// more; admin endpoints list and forget registrations and set faults.
func TestWebhookAdminForget(t *testing.T) {
	h := newHarness(t, Config{Seed: 14, Bookings: 1, Users: []User{{Username: "ada"}, {Username: "bob"}}})
	t.Cleanup(func() { h.Close() })
	sink := newCalSink(t, "s")
	if st, _ := h.call(t, "POST", PathWebhooks, h.tokenFor(t, "bob", "WEBHOOK_WRITE"), hookBody(sink.url, "s", booking3...)); st != 201 {
		t.Fatal(st)
	}
	admin := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var listed []Webhook
	st, body := admin("GET", "/_admin/users/bob/webhooks", "")
	if st != 200 || json.Unmarshal(body, &listed) != nil || len(listed) != 1 || listed[0].SubscriberURL != sink.url ||
		!listed[0].HasSecret || strings.Contains(string(body), `"s"`) {
		t.Fatalf("bob's webhooks: %d %s", st, body)
	}
	if st, body := admin("GET", "/_admin/users/ada/webhooks", ""); st != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("ada's webhooks: %d %s", st, body)
	}
	st, body = admin("POST", "/_admin/users/bob/bookings", "")
	var c Created
	if st != 200 || json.Unmarshal(body, &c) != nil || c.UID == "" || c.Username != "bob" || c.CreatedAt.IsZero() {
		t.Fatalf("create booking: %d %s", st, body)
	}
	b, _ := h.ForUser("bob")
	b.Churn(4) // each change announces itself once
	drainHooks(t, h.Server)
	got := sink.deliveries()
	if len(got) != 5 || !slices.ContainsFunc(got, func(d calDelivery) bool { return d.Trigger == TriggerBookingCreated && d.Payload["uid"] == c.UID }) {
		t.Fatalf("before forgetting: %d deliveries, want 5 with %s's creation", len(got), c.UID)
	}
	for _, want := range []int{204, 404} {
		if st, _ := admin("DELETE", "/_admin/webhooks/"+listed[0].ID, ""); st != want {
			t.Errorf("forget: %d, want %d", st, want)
		}
	}
	b.CreateBooking()
	b.Churn(5)
	drainHooks(t, h.Server)
	if got := sink.deliveries(); len(got) != 5 {
		t.Errorf("a forgotten webhook got %d deliveries more", len(got)-5)
	}
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"bad_signature_rate":-1}`, 400, "bad signature rate -1"},
		{`{"drop_rate":0.2,"bad_signature_rate":0.1,"delay_max":"1s"}`, 204, ""},
	} {
		if st, body := admin("PUT", "/_admin/webhook-faults", tc.body); st != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("PUT faults %s: %d %s", tc.body, st, body)
		}
	}
	if f := h.WebhookFaults(); f != (simhook.Faults{DropRate: 0.2, BadSignatureRate: 0.1, DelayMax: time.Second}) {
		t.Errorf("faults %+v", f)
	}
	st, body = admin("GET", "/_admin/stats", "")
	var stats Stats
	if st != 200 || json.Unmarshal(body, &stats) != nil || stats.Webhooks.Delivered != 5 {
		t.Errorf("stats: %d %s", st, body)
	}
}
