package schedsim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// SessionCookie is the cookie GET PathLogin sets: the username of the
// browser's session, whom the authorize page asks for consent.
const SessionCookie = "schedsim_user"

// userState is one user and what the simulator counts for them.
type userState struct {
	User
	stats  UserStats
	window []time.Time // admitted API calls within the last second, oldest first
}

// UserStats count one user's API use, over all of their access tokens.
type UserStats struct {
	Authorizations int `json:"authorizations"` // codes issued with the user's consent
	Admitted       int `json:"admitted"`       // /v2/ calls past the token check and rate limit
	Throttled      int `json:"throttled"`      // /v2/ calls answered 429
	// MaxPerSecond is the most calls admitted in any sliding second, over
	// every token of the user: a client that spreads its calls over fresh
	// tokens still shows here.
	MaxPerSecond int `json:"max_per_second"`
}

// admitted records an API call of user u admitted at now, real time as the
// rate limiter's (Config.Now may be frozen).
func (s *Server) admitted(u int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := s.users[u]
	us.stats.Admitted++
	// The window is (now-1s, now]: drop what is a second old or older.
	cut := 0
	for cut < len(us.window) && !us.window[cut].After(now.Add(-time.Second)) {
		cut++
	}
	us.window = append(slices.Delete(us.window, 0, cut), now)
	us.stats.MaxPerSecond = max(us.stats.MaxPerSecond, len(us.window))
}

// userIndex finds a user by username.
func (s *Server) userIndex(username string) (int, error) {
	i, ok := s.byName[username] // byName never changes after New
	if !ok {
		return 0, fmt.Errorf("schedsim: no user %q", username)
	}
	return i, nil
}

// handleLogin signs the browser in: GET /sim/login?user=<username> sets the
// session cookie, then redirects to next (a path on this server) when
// given, so one link can sign in and open the authorize page.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("user")
	if _, err := s.userIndex(name); err != nil {
		http.Error(w, fmt.Sprintf("unknown user %q", name), http.StatusNotFound)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: name, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	// Only a local path: the login must not become an open redirect.
	if next := q.Get("next"); strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "signed in as %s\n", name)
}

// consentingUser is whom the authorize page asks: the session cookie's
// user, else the one SetConsentingUser named, else the default user.
func (s *Server) consentingUser(r *http.Request) (int, error) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		return s.userIndex(c.Value)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consent, nil
}

// SetConsentingUser makes username the user who consents on the authorize
// page when the request carries no session cookie (a test driving the flow
// without a browser).
func (s *Server) SetConsentingUser(username string) error {
	i, err := s.userIndex(username)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consent = i
	return nil
}

// RevokeUserRefreshTokens refuses every refresh token username has granted
// so far, as that user revoking the app does; other users' tokens still
// work.
func (s *Server) RevokeUserRefreshTokens(username string) error {
	i, err := s.userIndex(username)
	if err != nil {
		return err
	}
	s.revokeRefresh(i)
	return nil
}

func (s *Server) revokeRefresh(u int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refresh {
		if r.user == u {
			r.used = true
		}
	}
}

// UserAdmin changes and reads one user's data, as Server's admin methods do
// for every user.
type UserAdmin struct {
	s *Server
	u int
}

// ForUser returns the admin of username's data.
func (s *Server) ForUser(username string) (*UserAdmin, error) {
	i, err := s.userIndex(username)
	if err != nil {
		return nil, err
	}
	return &UserAdmin{s: s, u: i}, nil
}

// User returns the user.
func (a *UserAdmin) User() User { return a.s.users[a.u].User }

// Create adds a booking of the user now and returns its uid.
func (a *UserAdmin) Create() string { return a.s.create(a.u) }

// Cancel cancels one of the user's bookings; false if unknown, another
// user's or already cancelled.
func (a *UserAdmin) Cancel(uid, reason string) bool { return a.s.cancelUID(uid, reason, a.u) }

// Reschedule moves one of the user's bookings and returns the new
// booking's uid; "" if unknown, another user's or cancelled.
func (a *UserAdmin) Reschedule(uid, reason string) string {
	return a.s.rescheduleUID(uid, reason, a.u)
}

// Churn makes n random changes to the user's bookings.
func (a *UserAdmin) Churn(n int) { a.s.churnN(n, a.u) }

// Journal returns the latest version of every booking of the user, ordered
// by id: what a client syncing with the user's token should hold.
func (a *UserAdmin) Journal() []JournalEntry { return a.s.journal(a.u) }

// RevokeRefreshTokens refuses every refresh token the user granted so far.
func (a *UserAdmin) RevokeRefreshTokens() { a.s.revokeRefresh(a.u) }

// Stats returns the user's counters.
func (a *UserAdmin) Stats() UserStats {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.users[a.u].stats
}
