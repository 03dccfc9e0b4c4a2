package schedsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

type harness struct {
	*Server
	srv *httptest.Server
	hc  *http.Client // does not follow redirects
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &harness{Server: s, srv: srv, hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// code authorizes client id with scope and returns the code.
func (h *harness) code(t *testing.T, id, scope string) string {
	t.Helper()
	q := url.Values{"client_id": {id}, "redirect_uri": {"http://127.0.0.1:9/cb"}, "state": {"st"}, "response_type": {"code"}}
	if scope != "" {
		q.Set("scope", scope)
	}
	resp, err := h.hc.Get(h.srv.URL + PathAuthorize + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("state") != "st" || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d %s", resp.StatusCode, loc.Query().Get("error"))
	}
	return loc.Query().Get("code")
}

// token posts params to the token endpoint, as a form or as JSON.
func (h *harness) token(t *testing.T, asJSON bool, p map[string]string) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	ct := "application/x-www-form-urlencoded"
	if asJSON {
		b, _ := json.Marshal(p)
		body, ct = strings.NewReader(string(b)), "application/json"
	} else {
		v := url.Values{}
		for k, x := range p {
			v.Set(k, x)
		}
		body = strings.NewReader(v.Encode())
	}
	resp, err := http.Post(h.srv.URL+PathToken, ct, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (h *harness) get(t *testing.T, path, access string, hdr ...string) (int, map[string]any) {
	t.Helper()
	return h.call(t, http.MethodGet, path, access, nil, hdr...)
}

// call makes an API request with a bearer token, a JSON body unless nil
// and extra headers (name, value, ...), and decodes the answer.
func (h *harness) call(t *testing.T, method, path, access string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+access)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestTokenEndpoint(t *testing.T) {
	h := newHarness(t, Config{Seed: 1, TokenExpiry: 2 * time.Second})
	c := h.Clients()[0]
	for _, asJSON := range []bool{false, true} {
		code := h.code(t, c.ID, "BOOKING_READ")
		st, tok := h.token(t, asJSON, map[string]string{"grant_type": "authorization_code", "client_id": c.ID, "client_secret": c.Secrets[1], "code": code, "redirect_uri": "http://127.0.0.1:9/cb"})
		if st != 200 || tok["expires_in"] != float64(2) || tok["token_type"] != "bearer" {
			t.Fatalf("exchange (json %t) = %d %v", asJSON, st, tok["error"])
		}
		rt := tok["refresh_token"].(string)
		st, next := h.token(t, asJSON, map[string]string{"grant_type": "refresh_token", "client_id": c.ID, "client_secret": c.Secrets[0], "refresh_token": rt})
		if st != 200 || next["refresh_token"] == rt {
			t.Fatalf("refresh = %d, rotated %t", st, next["refresh_token"] != rt)
		}
		if st, e := h.token(t, asJSON, map[string]string{"grant_type": "refresh_token", "client_id": c.ID, "client_secret": c.Secrets[0], "refresh_token": rt}); st != 400 || e["error"] != "invalid_grant" {
			t.Errorf("reused refresh token = %d %v", st, e["error"])
		}
		if st, e := h.token(t, asJSON, map[string]string{"grant_type": "refresh_token", "client_id": c.ID, "client_secret": "nope", "refresh_token": next["refresh_token"].(string)}); st != 401 || e["error"] != "invalid_client" {
			t.Errorf("wrong secret = %d %v", st, e["error"])
		}
	}
	if st := h.Stats(); st.SecretUsed[c.ID+"/1"] != 2 || st.SecretUsed[c.ID+"/2"] != 2 || st.RefusedRefresh != 2 {
		t.Errorf("stats = %+v", st)
	}
}

func TestPKCE(t *testing.T) {
	h := newHarness(t, Config{Seed: 2})
	q := url.Values{"client_id": {"sim-public"}, "redirect_uri": {"http://127.0.0.1:9/cb"}, "state": {"s"}, "scope": {"BOOKING_READ"}}
	resp, _ := h.hc.Get(h.srv.URL + PathAuthorize + "?" + q.Encode())
	resp.Body.Close()
	if loc, _ := url.Parse(resp.Header.Get("Location")); loc.Query().Get("error") != "invalid_request" {
		t.Errorf("public client without challenge: %s", loc)
	}
	verifier := oauth2.GenerateVerifier()
	q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(verifier))
	q.Set("code_challenge_method", "S256")
	resp, _ = h.hc.Get(h.srv.URL + PathAuthorize + "?" + q.Encode())
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	p := map[string]string{"grant_type": "authorization_code", "client_id": "sim-public", "code": loc.Query().Get("code"), "redirect_uri": "http://127.0.0.1:9/cb", "code_verifier": "wrong"}
	if st, e := h.token(t, false, p); st != 400 || e["error"] != "invalid_grant" {
		t.Errorf("wrong verifier = %d %v", st, e)
	}
	resp, _ = h.hc.Get(h.srv.URL + PathAuthorize + "?" + q.Encode())
	resp.Body.Close()
	loc, _ = url.Parse(resp.Header.Get("Location"))
	p["code"], p["code_verifier"] = loc.Query().Get("code"), verifier
	if st, e := h.token(t, false, p); st != 200 {
		t.Errorf("right verifier = %d %v", st, e)
	}
}

func TestScopesAndLegacy(t *testing.T) {
	h := newHarness(t, Config{Seed: 3})
	c := h.Clients()[0]
	_, tok := h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": c.ID, "client_secret": c.Secrets[0], "code": h.code(t, c.ID, "PROFILE_READ"), "redirect_uri": "http://127.0.0.1:9/cb"})
	at := tok["access_token"].(string)
	if st, _ := h.get(t, PathMe, at); st != 200 {
		t.Errorf("/v2/me with PROFILE_READ = %d", st)
	}
	st, body := h.get(t, PathBookings, at, "cal-api-version", APIVersion)
	msg := body["error"].(map[string]any)["message"].(string)
	if st != 403 || !strings.Contains(msg, "Required: BOOKING_READ. Token has: PROFILE_READ") {
		t.Errorf("/v2/bookings without BOOKING_READ = %d %q", st, msg)
	}
	l := h.Clients()[1]
	_, tok = h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": l.ID, "client_secret": l.Secrets[0], "code": h.code(t, l.ID, ""), "redirect_uri": "http://127.0.0.1:9/cb"})
	if st, _ := h.get(t, PathBookings, tok["access_token"].(string), "cal-api-version", APIVersion); st != 200 {
		t.Errorf("legacy token on /v2/bookings = %d", st)
	}
	if st, _ := h.get(t, PathBookings, "nope", "cal-api-version", APIVersion); st != 401 {
		t.Errorf("unknown token = %d", st)
	}
}

func TestBookingsQueryAndChurn(t *testing.T) {
	h := newHarness(t, Config{Seed: 4, Bookings: 30})
	l := h.Clients()[1]
	_, tok := h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": l.ID, "client_secret": l.Secrets[0], "code": h.code(t, l.ID, ""), "redirect_uri": "http://127.0.0.1:9/cb"})
	at := tok["access_token"].(string)
	if st, _ := h.get(t, PathBookings, at); st != 400 {
		t.Errorf("no cal-api-version = %d, want 400", st)
	}
	st, page := h.get(t, PathBookings+"?take=10&skip=25&sortUpdatedAt=asc", at, "cal-api-version", APIVersion)
	pg := page["pagination"].(map[string]any)
	if st != 200 || len(page["data"].([]any)) != 5 || pg["totalItems"] != float64(30) || pg["hasNextPage"] != false || pg["currentPage"] != float64(3) {
		t.Fatalf("page = %d %v", st, pg)
	}
	uid := h.Journal()[0].UID
	newUID := h.Reschedule(uid, "clash")
	h.Create()
	j := h.Journal()
	var old, moved JournalEntry
	for _, e := range j {
		switch e.UID {
		case uid:
			old = e
		case newUID:
			moved = e
		}
	}
	var ob, nb map[string]any
	_ = json.Unmarshal(old.Booking, &ob)
	_ = json.Unmarshal(moved.Booking, &nb)
	if len(j) != 32 || ob["status"] != "cancelled" || ob["rescheduledToUid"] != newUID || nb["rescheduledFromUid"] != uid || !moved.VersionTime.After(old.VersionTime.Add(-time.Second)) {
		t.Fatalf("reschedule: %d bookings, old %v, new %v", len(j), ob["status"], nb["rescheduledFromUid"])
	}
	since := old.VersionTime.Format(time.RFC3339Nano)
	st, page = h.get(t, PathBookings+"?afterUpdatedAt="+url.QueryEscape(since)+"&sortUpdatedAt=asc", at, "cal-api-version", APIVersion)
	if n := len(page["data"].([]any)); st != 200 || n != 3 {
		t.Errorf("afterUpdatedAt (inclusive) = %d, %d bookings, want 3", st, n)
	}
	if st, _ := h.get(t, PathBookings+"?take=251", at, "cal-api-version", APIVersion); st != 400 {
		t.Errorf("take=251 = %d", st)
	}
}

func TestRateLimitAndFaults(t *testing.T) {
	h := newHarness(t, Config{Seed: 5, RateLimit: 1, RateBurst: 1})
	l := h.Clients()[1]
	_, tok := h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": l.ID, "client_secret": l.Secrets[0], "code": h.code(t, l.ID, ""), "redirect_uri": "http://127.0.0.1:9/cb"})
	at := tok["access_token"].(string)
	h.get(t, PathMe, at)
	req, _ := http.NewRequest("GET", h.srv.URL+PathMe, nil)
	req.Header.Set("Authorization", "Bearer "+at)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second request within the second = %d", resp.StatusCode)
	}
	f := newHarness(t, Config{Seed: 6, FaultRate: 1})
	if st, _ := f.get(t, PathMe, "x"); st < 500 {
		t.Errorf("fault rate 1 = %d", st)
	}
}
