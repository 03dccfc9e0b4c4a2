// Package schedsim is an in-memory HTTP simulator of the scheduling API
// (Cal.com API v2) for tests and the demo: the OAuth 2.0 authorization-code
// flow with refresh-token rotation, scopes and legacy clients, GET /v2/me,
// and GET /v2/bookings (version 2024-08-13) over bookings that are created,
// cancelled and rescheduled while a client pages.
//
// What it follows, and from where (cal.com apps/api/v2 and
// packages/platform/types):
//   - token endpoint POST /v2/auth/oauth2/token, form-encoded or JSON body,
//     answers {access_token, token_type, refresh_token, expires_in} and RFC
//     6749 errors {error, error_description}: invalid_client (401),
//     invalid_grant / invalid_request / unsupported_grant_type (400); PKCE S256
//     for public clients (oauth2.service.ts, token.input.pipe.ts);
//   - scope enforcement as oauth-permissions.guard.ts: a token without scopes
//     (legacy) passes, an ORG_ scope satisfies the TEAM_ scope of the same
//     suffix, a refusal is a 403 whose message reads "insufficient_scope: ...
//     Required: X. Token has: Y, Z";
//   - the booking output of BookingOutput_2024_08_13 and the query parameters
//     of GetBookingsInput_2024_08_13 (take ≤ 250, skip, after/before
//     Created/UpdatedAt, sortCreated, sortUpdatedAt, status), envelope
//     {status, data, pagination}; the date filters are inclusive (>=, <=) and
//     a null updatedAt never matches an updatedAt filter, as in SQL;
//   - a reschedule creates a new booking (rescheduledFromUid = the old uid)
//     and cancels the old one (rescheduledToUid = the new uid).
//
// Where the real API is undocumented or lenient the simulator is strict on
// purpose, so that clients do the safe thing: GET /v2/bookings without the
// cal-api-version header 2024-08-13 is a 400 (the real API silently answers
// in an older shape), and a used refresh token is always refused.
//
// Deterministic for a seed as long as requests arrive in the same order.
package schedsim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/syncd-dev/syncd/internal/simhook"
)

// APIVersion is the cal-api-version header GET /v2/bookings requires.
const APIVersion = "2024-08-13"

// Paths the simulator serves.
const (
	PathAuthorize = "/auth/oauth2/authorize"
	PathToken     = "/v2/auth/oauth2/token"
	PathMe        = "/v2/me"
	PathBookings  = "/v2/bookings"
	PathAdmin     = "/_admin/"
	// PathLogin signs a browser in as ?user=<username> (a session cookie);
	// the authorize page then asks that user for consent.
	PathLogin = "/sim/login"
)

// Scope names used by the endpoints served.
const (
	ScopeBookingRead = "BOOKING_READ"
	ScopeProfileRead = "PROFILE_READ"
)

// Client is an OAuth client the simulator accepts.
type Client struct {
	ID           string   `json:"client_id"`
	Secrets      []string `json:"client_secrets,omitempty"` // up to 2 active; none for a public client
	RedirectURIs []string `json:"redirect_uris"`            // "" entries are ignored; empty: any loopback URI
	Scopes       []string `json:"scopes,omitempty"`         // scopes enabled on the client
	Public       bool     `json:"public,omitempty"`         // PKCE, no secret
	Legacy       bool     `json:"legacy,omitempty"`         // created before scopes: tokens without scope param carry none
}

// User is an account that authorizes clients: Config.User, or one of
// Config.Users.
type User struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	TimeZone string `json:"timeZone"`
}

// Config shapes the simulated service.
type Config struct {
	Seed     int64
	Bookings int // initial bookings, default 50
	// TokenExpiry is the access tokens' lifetime (expires_in), default 30m.
	TokenExpiry time.Duration
	// Clients accepted; default DefaultClients(Seed).
	Clients []Client
	User    User // default a fixed user
	// Users, when set, are the accounts that may authorize, each with their
	// own bookings, consent and tokens; the first is the default user (and
	// replaces User). Empty: [User]. Usernames must be distinct and non
	// empty; a zero ID becomes 7 + the user's index.
	Users []User
	// RateLimit is requests per second per access token on /v2/ before a
	// 429 with Retry-After; 0: unlimited.
	RateLimit float64
	RateBurst int
	// FaultRate is the share of /v2/ API calls (not the token endpoint)
	// answered 500, 502 or 503; TokenFaultRate the same for the token
	// endpoint.
	FaultRate      float64
	TokenFaultRate float64
	// ChurnRate is the probability that a GET /v2/bookings first creates,
	// cancels or reschedules a booking, as users do while a client pages.
	ChurnRate float64
	// Now is the clock of tokens and data; default time.Now.
	Now func() time.Time
	// WebhookFaults are the delivery faults of user webhooks (drops,
	// duplicates, delays, bad signatures), drawn from Seed;
	// SetWebhookFaults changes them later. WebhookTimeout bounds one
	// delivery, default 5s.
	WebhookFaults  simhook.Faults
	WebhookTimeout time.Duration
}

// DefaultClients are a confidential scoped client with two active secrets,
// a legacy client and a public (PKCE) client, with secrets drawn from seed.
func DefaultClients(seed int64) []Client {
	r := mrand.New(mrand.NewPCG(uint64(seed), 0x5ced))
	sec := func() string { return fmt.Sprintf("sim_secret_%016x", r.Uint64()) }
	all := []string{ScopeBookingRead, ScopeProfileRead, "EVENT_TYPE_READ", "SCHEDULE_READ", ScopeWebhookRead, ScopeWebhookWrite}
	return []Client{
		{ID: "sim-client", Secrets: []string{sec(), sec()}, Scopes: all},
		{ID: "sim-legacy", Secrets: []string{sec()}, Scopes: all, Legacy: true},
		{ID: "sim-public", Public: true, Scopes: all},
	}
}

// Server is the simulator; it is an http.Handler. Safe for concurrent use.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	clients map[string]*Client

	mu       sync.Mutex
	rnd      *mrand.Rand
	last     time.Time // latest data timestamp handed out: each change gets a later one
	codes    map[string]*grant
	access   map[string]*grant
	refresh  map[string]*refreshState
	limiters map[string]*rate.Limiter
	deny     string // error= for the next authorizations, e.g. access_denied
	users    []*userState
	byName   map[string]int // username → index in users
	consent  int            // the user who consents when the request names none
	bookings []*booking
	byUID    map[string]*booking
	nextID   int64
	stats    Stats
	hooks    []*webhook         // user webhooks, in creation order (webhooks.go)
	hookRnd  *mrand.Rand        // webhook ids, apart from the data's source
	hooksOut *simhook.Deliverer // deliveries and their faults
}

// grant is what a code or token stands for.
type grant struct {
	user      int // index in Server.users: whose consent, whose data
	clientID  string
	scopes    []string // nil: unscoped (legacy)
	challenge string   // PKCE S256 challenge of the code
	redirect  string
	expiry    time.Time
}

type refreshState struct {
	grant
	used bool
}

// Stats counts what clients did; tests read them through Stats().
type Stats struct {
	Authorizations  int            `json:"authorizations"`
	CodeExchanges   int            `json:"code_exchanges"`
	Refreshes       int            `json:"refreshes"`
	RefusedRefresh  int            `json:"refused_refreshes"` // invalid_grant on refresh
	InvalidClient   int            `json:"invalid_client"`
	SecretUsed      map[string]int `json:"secret_used"` // "client/1", "client/2": successful token calls per secret
	BookingRequests int            `json:"booking_requests"`
	Throttled       int            `json:"throttled"`
	Faults          int            `json:"faults"`
	Webhooks        simhook.Stats  `json:"webhooks"` // deliveries and their injected faults
}

// New builds a simulator. It panics when Config.Users has an empty or
// repeated username or Config.WebhookFaults are out of range, mistakes in
// the caller's code (cmd/schedsim checks its flags first). Close ends its
// webhook deliveries.
func New(cfg Config) *Server {
	if cfg.Bookings == 0 {
		cfg.Bookings = 50
	}
	if cfg.TokenExpiry == 0 {
		cfg.TokenExpiry = 30 * time.Minute
	}
	if cfg.Clients == nil {
		cfg.Clients = DefaultClients(cfg.Seed)
	}
	if len(cfg.Users) > 0 {
		cfg.Users = append([]User(nil), cfg.Users...)
		cfg.User = cfg.Users[0]
	}
	if cfg.User.ID == 0 {
		cfg.User = User{ID: 7, Username: "ada", Email: "ada@example.com", Name: "Ada Lovelace", TimeZone: "Europe/London"}
	}
	if len(cfg.Users) == 0 {
		cfg.Users = []User{cfg.User}
	}
	for i := range cfg.Users {
		if cfg.Users[i].ID == 0 {
			cfg.Users[i].ID = 7 + int64(i)
		}
	}
	cfg.User = cfg.Users[0]
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:      cfg,
		clients:  make(map[string]*Client),
		rnd:      mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0xb00c)),
		codes:    make(map[string]*grant),
		access:   make(map[string]*grant),
		refresh:  make(map[string]*refreshState),
		limiters: make(map[string]*rate.Limiter),
		byUID:    make(map[string]*booking),
		nextID:   1000,
		stats:    Stats{SecretUsed: map[string]int{}},
		byName:   make(map[string]int),
		hookRnd:  mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x400c)),
	}
	out, err := simhook.New(uint64(cfg.Seed)^0x5c4e_d400c, cfg.WebhookTimeout, cfg.WebhookFaults)
	if err != nil {
		panic("schedsim: " + err.Error())
	}
	s.hooksOut = out
	for i, u := range cfg.Users {
		if u.Username == "" {
			panic(fmt.Sprintf("schedsim: user %d has no username", i))
		}
		if _, dup := s.byName[u.Username]; dup {
			panic(fmt.Sprintf("schedsim: username %q is used twice", u.Username))
		}
		s.byName[u.Username] = i
		s.users = append(s.users, &userState{User: u})
	}
	for i := range cfg.Clients {
		c := cfg.Clients[i]
		s.clients[c.ID] = &c
	}
	s.seedBookings()
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET "+PathAuthorize, s.handleAuthorize)
	s.mux.HandleFunc("GET "+PathLogin, s.handleLogin)
	s.mux.HandleFunc("POST "+PathToken, s.handleToken)
	s.mux.HandleFunc("GET "+PathMe, s.api(ScopeProfileRead, s.handleMe))
	s.mux.HandleFunc("GET "+PathBookings, s.api(ScopeBookingRead, s.handleBookings))
	s.routeWebhooks()
	s.routeAdmin()
	s.routeWebhookAdmin()
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// Clients returns the OAuth clients the simulator accepts.
func (s *Server) Clients() []Client { return append([]Client(nil), s.cfg.Clients...) }

// User returns the default account: the first of Users.
func (s *Server) User() User { return s.cfg.User }

// Users returns every account, the default first.
func (s *Server) Users() []User { return append([]User(nil), s.cfg.Users...) }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Webhooks = s.hooksOut.Stats()
	st.SecretUsed = make(map[string]int, len(s.stats.SecretUsed))
	for k, v := range s.stats.SecretUsed {
		st.SecretUsed[k] = v
	}
	return st
}

// SetTokenExpiry changes the lifetime of tokens issued from now on.
func (s *Server) SetTokenExpiry(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.TokenExpiry = d
}

// DenyAuthorizations makes the authorize page redirect with error=code (e.g.
// "access_denied") instead of a code; "" approves again.
func (s *Server) DenyAuthorizations(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = code
}

// SetChurnRate changes Config.ChurnRate: a test stops the churn before its
// last pass, so that the truth it compares with stands still.
func (s *Server) SetChurnRate(r float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.ChurnRate = r
}

// ExpireAccessTokens makes every access token issued so far expired.
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.access {
		g.expiry = time.Time{}
	}
}

// RevokeRefreshTokens refuses every refresh token issued so far, of every
// user, as every user revoking the app does.
func (s *Server) RevokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refresh {
		r.used = true
	}
}

// newSecret is an opaque random token value; crypto/rand keeps them
// unguessable even though the data is seeded.
func newSecret(prefix string) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// tick returns the time of a data change: now, but always after the
// previous one (millisecond precision, as the API's timestamps), so every
// version of a booking has its own updatedAt. Callers hold mu.
func (s *Server) tick() time.Time {
	t := s.cfg.Now().UTC().Truncate(time.Millisecond)
	if !t.After(s.last) {
		t = s.last.Add(time.Millisecond)
	}
	s.last = t
	return t
}
