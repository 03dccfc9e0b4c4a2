package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
)

type memStore struct {
	mu  sync.Mutex
	tok *oauth.Token
}

func (m *memStore) Load(context.Context) (oauth.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok == nil {
		return oauth.Token{}, oauth.ErrNoToken
	}
	return *m.tok, nil
}

func (m *memStore) Save(_ context.Context, t oauth.Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tok = &t
	return nil
}

type env struct {
	sim *schedsim.Server
	srv *httptest.Server
}

func newEnv(t *testing.T, cfg schedsim.Config) *env {
	t.Helper()
	s := schedsim.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &env{sim: s, srv: srv}
}

// client signs in with the simulator's client id and scopes (no browser:
// the authorize page's redirect is read directly) and returns a bookings
// client over a TokenSource.
func (e *env) client(t *testing.T, id string, scopes ...string) (*Client, *oauth.TokenSource) {
	t.Helper()
	var sc schedsim.Client
	for _, c := range e.sim.Clients() {
		if c.ID == id {
			sc = c
		}
	}
	cfg := oauth.Config{
		AuthURL: e.srv.URL + schedsim.PathAuthorize, TokenURL: e.srv.URL + schedsim.PathToken,
		ClientID: id, RedirectURI: "http://127.0.0.1:9/cb", Scopes: scopes, Public: sc.Public, Legacy: sc.Legacy,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	}
	if len(sc.Secrets) > 0 {
		cfg.ClientSecret = sc.Secrets[0]
	}
	oc, err := oauth.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ar, _ := oc.NewAuthRequest()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(ar.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, err := oauth.ParseRedirect(resp.Header.Get("Location"), ar.State)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oc.Exchange(context.Background(), code, ar.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	ts := oauth.NewTokenSource(oc, &memStore{tok: &tok}, oauth.SourceOptions{})
	c, err := New(Config{BaseURL: e.srv.URL, Tokens: ts, RateLimit: 1000, Burst: 100, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 8})
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}

func TestMeAndScopes(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 1, Bookings: 5})
	ctx := context.Background()
	full, _ := e.client(t, "sim-client", ScopeBookingRead, ScopeProfileRead)
	me, err := full.Me(ctx)
	if err != nil || me.Email != e.sim.User().Email || me.ID != e.sim.User().ID {
		t.Fatalf("me = %+v, %v", me, err)
	}
	profileOnly, _ := e.client(t, "sim-client", ScopeProfileRead)
	_, err = profileOnly.ListBookings(ctx, ListParams{})
	var se *oauth.ScopeError
	if !errors.As(err, &se) || se.Needed != ScopeBookingRead || strings.Join(se.Granted, ",") != ScopeProfileRead ||
		!strings.Contains(err.Error(), "run `syncd auth login` again") {
		t.Fatalf("bookings without BOOKING_READ: %v", err)
	}
	bookingOnly, _ := e.client(t, "sim-client", ScopeBookingRead)
	if _, err := bookingOnly.Me(ctx); !errors.As(err, &se) || se.Needed != ScopeProfileRead {
		t.Fatalf("me without PROFILE_READ: %v", err)
	}
	legacy, _ := e.client(t, "sim-legacy")
	if _, err := legacy.ListBookings(ctx, ListParams{Take: 2}); err != nil {
		t.Errorf("legacy token: %v", err)
	}
}

// The walk over [start, end) while bookings change under it: every booking
// whose latest version is in the window is passed once, with that version;
// anything else passed was a real version superseded during the walk. Two
// windows back to back cover every booking's latest version exactly once.
func TestChangesMatchJournalUnderChurnAndFaults(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 2, Bookings: 700, ChurnRate: 0.5, FaultRate: 0.15})
	c, _ := e.client(t, "sim-legacy")
	ctx := context.Background()
	start := time.Unix(0, 0)
	end := time.Now().Add(-time.Millisecond)
	got := map[string]time.Time{}
	walk := func(from, to time.Time) {
		err := c.Changes(ctx, from, to, func(b *Booking) error {
			if _, dup := got[b.UID]; dup && got[b.UID].Equal(b.VersionTime()) {
				t.Errorf("booking %s passed twice with one version", b.UID)
			}
			got[b.UID] = b.VersionTime()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(start, end)
	after := e.sim.Journal()
	for _, j := range after {
		v, ok := got[j.UID]
		switch {
		case j.VersionTime.Before(end) && (!ok || !v.Equal(j.VersionTime)):
			t.Errorf("booking %s (version %s) missing or wrong (%s)", j.UID, j.VersionTime, v)
		case !j.VersionTime.Before(end) && ok && !v.Before(end):
			t.Errorf("booking %s passed with a version outside the window", j.UID)
		}
	}
	if st := e.sim.Stats(); st.Faults == 0 || st.BookingRequests < 4 {
		t.Errorf("the walk met no fault or few pages: %+v", st)
	}
	// Churn stops; a second window takes the rest.
	end2 := time.Now().Add(time.Second)
	time.Sleep(1100 * time.Millisecond)
	final := map[string]time.Time{}
	for _, j := range e.sim.Journal() {
		final[j.UID] = j.VersionTime
	}
	got = map[string]time.Time{}
	walk(start, end2)
	for uid, vt := range final {
		if vt.Before(end2) && !got[uid].Equal(vt) {
			t.Errorf("after the second walk, booking %s has %s, want %s", uid, got[uid], vt)
		}
	}
}

func TestLoginRequiredStopsTheSource(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 3, Bookings: 3})
	c, _ := e.client(t, "sim-client", ScopeBookingRead, ScopeProfileRead)
	e.sim.ExpireAccessTokens()
	e.sim.RevokeRefreshTokens()
	_, err := c.Me(context.Background())
	if !errors.Is(err, oauth.ErrLoginRequired) || !strings.HasSuffix(err.Error(), "run `syncd auth login` again") {
		t.Fatalf("err = %v", err)
	}
}

// An access token refused before its expiry (401) is refreshed once and the
// call goes through.
func TestExpiredAccessTokenRefreshedOnce(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 4, Bookings: 3})
	c, _ := e.client(t, "sim-client", ScopeBookingRead, ScopeProfileRead)
	e.sim.ExpireAccessTokens()
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Stats().Refreshes; n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

// A 401 is answered with one refresh and one retry per call, whatever
// attempt met it: a transient failure first must not use up the refresh,
// and a token refused again after its refresh is not refreshed in a loop.
func TestUnauthorizedRefreshedOncePerCall(t *testing.T) {
	const (
		unavailable = "503 and expire" // expire every access token, answer 503
		refused     = "401"            // answer 401 whatever the token
	)
	tests := []struct {
		name          string
		script        []string // answers to the first GET /v2/me; then the simulator answers
		maxAttempts   int      // 0: 8
		wantErr       bool
		wantRequests  int32
		wantRefreshes int
	}{
		{"401 on the first attempt", []string{refused}, 0, false, 2, 1},
		{"401 after a transient 503", []string{unavailable}, 0, false, 3, 1},
		{"401 again after the refresh", []string{refused, refused}, 0, true, 2, 1},
		{"401 again after a 503 and a refresh", []string{unavailable, refused, refused}, 0, true, 3, 1},
		// The refresh's retry is not a retry of a failure: it is granted
		// beyond the attempts, once.
		{"401 on the last attempt", []string{"503", "503", refused}, 3, false, 4, 1},
		{"401 on the only attempt", []string{refused}, 1, false, 2, 1},
		{"401 again on the granted attempt", []string{"503", refused, refused}, 2, true, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, schedsim.Config{Seed: 4, Bookings: 3})
			var n atomic.Int32
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == schedsim.PathMe {
					if i := int(n.Add(1)) - 1; i < len(tt.script) {
						switch tt.script[i] {
						case unavailable:
							e.sim.ExpireAccessTokens()
							http.Error(w, `{"status":"error","error":{"message":"temporarily unavailable"}}`, http.StatusServiceUnavailable)
						case refused:
							http.Error(w, `{"status":"error","error":{"message":"Invalid Access Token."}}`, http.StatusUnauthorized)
						case "503":
							http.Error(w, `{"status":"error","error":{"message":"temporarily unavailable"}}`, http.StatusServiceUnavailable)
						}
						return
					}
				}
				e.sim.ServeHTTP(w, r)
			}))
			defer front.Close()
			_, ts := e.client(t, "sim-client", ScopeBookingRead, ScopeProfileRead)
			attempts := tt.maxAttempts
			if attempts == 0 {
				attempts = 8
			}
			c, err := New(Config{BaseURL: front.URL, Tokens: ts, RateLimit: 1000, Burst: 100,
				MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: attempts})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Me(context.Background())
			var ae *APIError
			switch {
			case !tt.wantErr && err != nil:
				t.Errorf("Me: %v", err)
			case tt.wantErr && (!errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.HasSuffix(err.Error(), "run `syncd auth login` again")):
				t.Errorf("Me: err = %v, want a 401 that asks for a new login", err)
			}
			if got := n.Load(); got != tt.wantRequests {
				t.Errorf("%d requests to %s, want %d", got, schedsim.PathMe, tt.wantRequests)
			}
			if got := e.sim.Stats().Refreshes; got != tt.wantRefreshes {
				t.Errorf("%d refreshes, want %d", got, tt.wantRefreshes)
			}
		})
	}
}

func TestListParamsQuery(t *testing.T) {
	a := time.Date(2025, 3, 7, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	q, err := ListParams{Take: 250, Skip: 5, AfterUpdatedAt: &a, SortUpdatedAt: "asc", Statuses: AllStatuses}.query()
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"take": {"250"}, "skip": {"5"}, "afterUpdatedAt": {"2025-03-07T09:00:00.123Z"}, "sortUpdatedAt": {"asc"}, "status": {"upcoming,recurring,past,cancelled,unconfirmed"}}
	if q.Encode() != want.Encode() {
		t.Errorf("query = %s, want %s", q.Encode(), want.Encode())
	}
	if _, err := (ListParams{Take: 251}).query(); err == nil {
		t.Error("take 251 accepted")
	}
}

func TestDecodeBooking(t *testing.T) {
	good := `{"id":1,"uid":"u1","title":"T","status":"accepted","start":"2024-08-13T15:30:00Z","end":"2024-08-13T16:30:00.000Z",
	 "createdAt":"2024-08-01T00:00:00Z","updatedAt":null,"eventType":{"id":5,"slug":"s"},"attendees":[{"name":"A","timeZone":"UTC","absent":false,"seatUid":"x",
	 "bookingFieldsResponses":{"name": "A", "dietary": ["vegan"]},"metadata":{"ticket": "T-1"}},{"name":"B","timeZone":"UTC","absent":false,"metadata":null}],
	 "hosts":[{"id":2,"name":"H","timeZone":"UTC"}],"bookingFieldsResponses":{"b": [1, {"c": null}], "a": "é"},"someNewField":{"x":1}}`
	b, err := DecodeBooking(json.RawMessage(good))
	if err != nil {
		t.Fatal(err)
	}
	if b.Duration != 60 || b.UpdatedAt != nil || !b.VersionTime().Equal(b.CreatedAt) || *b.EventTypeID != 5 ||
		string(b.BookingFieldsResponses) != `{"b":[1,{"c":null}],"a":"é"}` || *b.Attendees[0].SeatUID != "x" || b.Hosts[0].ID != 2 {
		t.Errorf("booking = %+v", b)
	}
	if a := b.Attendees; len(a) != 2 || string(a[0].BookingFieldsResponses) != `{"name":"A","dietary":["vegan"]}` ||
		string(a[0].Metadata) != `{"ticket":"T-1"}` || a[1].BookingFieldsResponses != nil || a[1].Metadata != nil {
		t.Errorf("attendees = %+v", a)
	}
	bad := []struct{ body, field string }{
		{strings.Replace(good, `"id":1`, `"id":"one"`, 1), "id"},
		{strings.Replace(good, `"start":"2024-08-13T15:30:00Z"`, `"start":"yesterday"`, 1), "start"},
		{strings.Replace(good, `"title":"T",`, ``, 1), "title"},
		{strings.Replace(good, `"attendees":[`, `"attendees":[7,`, 1), "attendees"},
		{strings.Replace(good, `"bookingFieldsResponses":{"b": [1, {"c": null}], "a": "é"}`, `"bookingFieldsResponses":"text"`, 1), "bookingFieldsResponses"},
		{strings.Replace(good, `"metadata":null}`, `"bookingFieldsResponses":["a"]}`, 1), "attendees[1].bookingFieldsResponses"},
		{strings.Replace(good, `"metadata":{"ticket": "T-1"}`, `"metadata":"T-1"`, 1), "attendees[0].metadata"},
	}
	for _, tt := range bad {
		_, err := DecodeBooking(json.RawMessage(tt.body))
		var be *BookingError
		if !errors.As(err, &be) || be.Field != tt.field || be.UID != "u1" {
			t.Errorf("field %s: err = %v", tt.field, err)
		}
	}
}
