package schedsim

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"
)

var twoUsers = []User{
	{Username: "ada", Email: "ada@example.com", Name: "Ada Lovelace", TimeZone: "Europe/London"},
	{ID: 42, Username: "bob", Email: "bob@example.com", Name: "Bob Kahn", TimeZone: "America/New_York"},
}

// browser is a user's browser: it keeps the session cookie and follows
// redirects, landing on a loopback callback that records the query.
type browser struct {
	hc       *http.Client
	callback string
	got      chan url.Values
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{hc: &http.Client{Jar: jar}, got: make(chan url.Values, 1)}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.got <- r.URL.Query()
	}))
	t.Cleanup(cb.Close)
	b.callback = cb.URL + "/cb"
	return b
}

// login signs the browser in as username.
func (b *browser) login(t *testing.T, h *harness, username string) {
	t.Helper()
	resp, err := b.hc.Get(h.srv.URL + PathLogin + "?user=" + url.QueryEscape(username))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login as %s: %d", username, resp.StatusCode)
	}
}

// authorize opens the authorize page and returns the callback's query.
func (b *browser) authorize(t *testing.T, h *harness, state string) url.Values {
	t.Helper()
	q := url.Values{"client_id": {"sim-client"}, "redirect_uri": {b.callback}, "state": {state},
		"scope": {ScopeBookingRead + " " + ScopeProfileRead}, "response_type": {"code"}}
	resp, err := b.hc.Get(h.srv.URL + PathAuthorize + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	got := <-b.got
	if got.Get("state") != state || got.Get("code") == "" {
		t.Fatalf("callback got %v", got)
	}
	return got
}

// exchange trades a code for tokens and returns access and refresh token.
func (h *harness) exchange(t *testing.T, code, redirect string) (string, string) {
	t.Helper()
	c := h.Clients()[0]
	st, tok := h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": c.ID,
		"client_secret": c.Secrets[0], "code": code, "redirect_uri": redirect})
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	return tok["access_token"].(string), tok["refresh_token"].(string)
}

func (h *harness) refreshStatus(t *testing.T, rt string) (int, string) {
	t.Helper()
	c := h.Clients()[0]
	st, tok := h.token(t, false, map[string]string{"grant_type": "refresh_token", "client_id": c.ID,
		"client_secret": c.Secrets[0], "refresh_token": rt})
	next, _ := tok["refresh_token"].(string)
	return st, next
}

// me returns the username /v2/me answers for a token.
func (h *harness) me(t *testing.T, at string) string {
	t.Helper()
	st, body := h.get(t, PathMe, at)
	data, _ := body["data"].(map[string]any)
	if st != http.StatusOK || data == nil {
		t.Fatalf("GET /v2/me: %d %v", st, body)
	}
	name, _ := data["username"].(string)
	return name
}

// uids lists every booking uid the token can read.
func (h *harness) uids(t *testing.T, at string) []string {
	t.Helper()
	st, body := h.get(t, PathBookings+"?take=250", at, "cal-api-version", APIVersion)
	if st != http.StatusOK {
		t.Fatalf("GET /v2/bookings: %d %v", st, body)
	}
	var out []string
	for _, b := range body["data"].([]any) {
		out = append(out, b.(map[string]any)["uid"].(string))
	}
	slices.Sort(out)
	return out
}

func journalUIDs(j []JournalEntry) []string {
	var out []string
	for _, e := range j {
		out = append(out, e.UID)
	}
	slices.Sort(out)
	return out
}

func TestUsersDefault(t *testing.T) {
	s := New(Config{Seed: 1})
	if u := s.Users(); len(u) != 1 || u[0] != s.User() || u[0].Username != "ada" {
		t.Fatalf("Users = %+v, User = %+v", u, s.User())
	}
	s = New(Config{Seed: 1, Users: twoUsers})
	if u := s.Users(); len(u) != 2 || u[0].ID != 7 || u[1].ID != 42 || s.User() != u[0] {
		t.Fatalf("Users = %+v, User = %+v", u, s.User())
	}
	for _, tc := range []struct {
		name  string
		users []User
	}{
		{"empty username", []User{{Username: "a"}, {}}},
		{"repeated username", []User{{Username: "a"}, {Username: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New accepted the users")
				}
			}()
			New(Config{Users: tc.users})
		})
	}
}

// TestUsersFirstKeepsSingleUserData: adding users does not change the
// first user's seeded bookings.
func TestUsersFirstKeepsSingleUserData(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	one := New(Config{Seed: 3, Bookings: 20, Now: clock, User: twoUsers[0]}).Journal()
	two, err := New(Config{Seed: 3, Bookings: 20, Now: clock, Users: twoUsers}).ForUser("ada")
	if err != nil {
		t.Fatal(err)
	}
	if got := two.Journal(); !reflect.DeepEqual(got, one) {
		t.Errorf("ada's journal with two users differs from the single-user one")
	}
}

func TestUsersCookieConsent(t *testing.T) {
	h := newHarness(t, Config{Seed: 4, Bookings: 15, Users: twoUsers})
	tokens := map[string][2]string{} // username → access, refresh
	for _, name := range []string{"ada", "bob"} {
		b := newBrowser(t)
		b.login(t, h, name)
		got := b.authorize(t, h, "st-"+name)
		at, rt := h.exchange(t, got.Get("code"), b.callback)
		tokens[name] = [2]string{at, rt}

		// The code was used: a replay is refused.
		c := h.Clients()[0]
		st, e := h.token(t, false, map[string]string{"grant_type": "authorization_code", "client_id": c.ID,
			"client_secret": c.Secrets[0], "code": got.Get("code"), "redirect_uri": b.callback})
		if st != http.StatusBadRequest || e["error"] != "invalid_grant" {
			t.Errorf("%s: replayed code: %d %v", name, st, e)
		}
	}
	if tokens["ada"][0] == tokens["bob"][0] {
		t.Fatal("both users got the same access token")
	}

	seen := map[string]string{}
	for _, name := range []string{"ada", "bob"} {
		at := tokens[name][0]
		if got := h.me(t, at); got != name {
			t.Errorf("/v2/me with %s's token answers %s", name, got)
		}
		a, err := h.ForUser(name)
		if err != nil {
			t.Fatal(err)
		}
		got, want := h.uids(t, at), journalUIDs(a.Journal())
		if len(got) != 15 || !slices.Equal(got, want) {
			t.Errorf("%s's token reads %d bookings, the journal has %d; equal %t", name, len(got), len(want), slices.Equal(got, want))
		}
		for _, uid := range got {
			if other, ok := seen[uid]; ok {
				t.Errorf("booking %s is read by %s and %s", uid, other, name)
			}
			seen[uid] = name
		}
		if st := a.Stats(); st.Authorizations != 1 || st.Admitted != 2 {
			t.Errorf("%s's stats %+v", name, st)
		}
	}
	if n := len(h.Journal()); n != 30 {
		t.Errorf("the whole journal has %d bookings, want 30", n)
	}

	// Revoking ada's refresh tokens leaves bob's working.
	if err := h.RevokeUserRefreshTokens("ada"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.refreshStatus(t, tokens["ada"][1]); st != http.StatusBadRequest {
		t.Errorf("ada's revoked refresh token: %d", st)
	}
	st, next := h.refreshStatus(t, tokens["bob"][1])
	if st != http.StatusOK {
		t.Fatalf("bob's refresh after ada's revocation: %d", st)
	}
	// The refreshed token is still bob's.
	c := h.Clients()[0]
	_, tok := h.token(t, false, map[string]string{"grant_type": "refresh_token", "client_id": c.ID,
		"client_secret": c.Secrets[0], "refresh_token": next})
	if at, _ := tok["access_token"].(string); at == "" || h.me(t, at) != "bob" {
		t.Errorf("bob's refreshed token: %v", tok)
	}
	if err := h.RevokeUserRefreshTokens("carol"); err == nil {
		t.Error("revoking an unknown user's tokens succeeded")
	}
}

func TestUsersConsentChoice(t *testing.T) {
	h := newHarness(t, Config{Seed: 5, Bookings: 3, Users: twoUsers})
	whoConsents := func(b *browser) string {
		t.Helper()
		got := b.authorize(t, h, "s")
		at, _ := h.exchange(t, got.Get("code"), b.callback)
		return h.me(t, at)
	}
	anon := newBrowser(t)
	if got := whoConsents(anon); got != "ada" {
		t.Errorf("without a session: %s consents, want the first user", got)
	}
	if err := h.SetConsentingUser("bob"); err != nil {
		t.Fatal(err)
	}
	if got := whoConsents(anon); got != "bob" {
		t.Errorf("after SetConsentingUser(bob): %s consents", got)
	}
	signed := newBrowser(t)
	signed.login(t, h, "ada")
	if got := whoConsents(signed); got != "ada" {
		t.Errorf("the session's ada does not win over SetConsentingUser: %s", got)
	}
	if err := h.SetConsentingUser("carol"); err == nil {
		t.Error("SetConsentingUser accepted an unknown user")
	}

	// Unknown users: no login, and a stale cookie is refused, not guessed.
	resp, err := http.Get(h.srv.URL + PathLogin + "?user=carol")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("login as an unknown user: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+PathAuthorize+"?"+url.Values{"client_id": {"sim-client"},
		"redirect_uri": {"http://127.0.0.1:9/cb"}, "scope": {ScopeBookingRead}}.Encode(), nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: "carol"})
	resp, err = h.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("authorize with an unknown session user: %d", resp.StatusCode)
	}

	// login?next= lands on a local path only.
	for _, tc := range []struct {
		next, location string
	}{
		{"/auth/oauth2/authorize?x=1", "/auth/oauth2/authorize?x=1"},
		{"//evil.example/", ""},
		{"https://evil.example/", ""},
	} {
		resp, err := h.hc.Get(h.srv.URL + PathLogin + "?user=bob&next=" + url.QueryEscape(tc.next))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); got != tc.location {
			t.Errorf("next=%s: Location %q, want %q", tc.next, got, tc.location)
		}
	}
}

func TestUserAdmin(t *testing.T) {
	h := newHarness(t, Config{Seed: 6, Bookings: 5, Users: twoUsers})
	ada, _ := h.ForUser("ada")
	bob, err := h.ForUser("bob")
	if err != nil || bob.User().Username != "bob" {
		t.Fatalf("ForUser(bob) = %v, %v", bob, err)
	}
	if _, err := h.ForUser("carol"); err == nil {
		t.Error("ForUser(carol) succeeded")
	}
	uid := bob.Create()
	adaUID := ada.Journal()[0].UID
	for _, tc := range []struct {
		name string
		do   func() bool
		want bool
	}{
		{"bob cancels ada's booking", func() bool { return bob.Cancel(adaUID, "") }, false},
		{"bob reschedules ada's booking", func() bool { return bob.Reschedule(adaUID, "") != "" }, false},
		{"bob cancels his own booking", func() bool { return bob.Cancel(uid, "no") }, true},
		{"bob cancels it again", func() bool { return bob.Cancel(uid, "no") }, false},
	} {
		if got := tc.do(); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
	bob.Churn(10)
	for _, e := range bob.Journal() {
		if e.Username != "bob" {
			t.Errorf("bob's journal holds %s's booking %s", e.Username, e.UID)
		}
	}
	if n := len(ada.Journal()); n != 5 {
		t.Errorf("bob's changes changed ada's bookings: %d", n)
	}

	// The same over HTTP.
	resp, err := http.Post(h.srv.URL+"/_admin/users/bob/bookings", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	resp, err = http.Get(h.srv.URL + "/_admin/users/bob/journal")
	if err != nil {
		t.Fatal(err)
	}
	var j []JournalEntry
	_ = json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	if created["uid"] == "" || !slices.Contains(journalUIDs(j), created["uid"]) {
		t.Errorf("created %v is not in bob's journal over HTTP", created)
	}
	for _, path := range []string{"/_admin/users/carol/journal", "/_admin/users/carol/stats"} {
		resp, err := http.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}

// TestUsersRateStats: the sim measures each user's calls per second over
// all of their tokens.
func TestUsersRateStats(t *testing.T) {
	const limit, burst = 5, 5
	h := newHarness(t, Config{Seed: 7, Bookings: 3, Users: twoUsers, RateLimit: limit, RateBurst: burst})
	var bobTokens []string
	for range 2 {
		b := newBrowser(t)
		b.login(t, h, "bob")
		at, _ := h.exchange(t, b.authorize(t, h, "s").Get("code"), b.callback)
		bobTokens = append(bobTokens, at)
	}
	throttled := 0
	for i := range 30 {
		if st, _ := h.get(t, PathMe, bobTokens[i%2]); st == http.StatusTooManyRequests {
			throttled++
		}
	}
	st := mustStats(t, h, "bob")
	if throttled == 0 || st.Throttled != throttled || st.Admitted != 30-throttled {
		t.Errorf("%d throttled; bob's stats %+v", throttled, st)
	}
	// Two tokens, each within its own limit: together more than one's.
	if st.MaxPerSecond <= limit || st.MaxPerSecond > 2*(limit+burst) {
		t.Errorf("bob's MaxPerSecond %d, want in (%d, %d]", st.MaxPerSecond, limit, 2*(limit+burst))
	}
	if st := mustStats(t, h, "ada"); st != (UserStats{}) {
		t.Errorf("ada's stats %+v after only bob called", st)
	}
}

func mustStats(t *testing.T, h *harness, name string) UserStats {
	t.Helper()
	a, err := h.ForUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return a.Stats()
}
