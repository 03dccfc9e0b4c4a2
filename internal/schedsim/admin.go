package schedsim

import (
	"encoding/json"
	"net/http"
	"time"
)

// JournalEntry is the truth about one booking: its latest version as the
// API renders it, and the version time a client should record for it.
type JournalEntry struct {
	UID         string          `json:"uid"`
	ID          int64           `json:"id"`
	Username    string          `json:"username"` // the host: whose token lists it
	Status      string          `json:"status"`
	VersionTime time.Time       `json:"version_time"` // updatedAt, or createdAt when null
	Booking     json.RawMessage `json:"booking"`
}

// Journal returns every booking's latest version, of every user, ordered
// by id.
func (s *Server) Journal() []JournalEntry { return s.journal(anyUser) }

// anyUser stands for every user where an owner is asked for.
const anyUser = -1

func (s *Server) journal(owner int) []JournalEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JournalEntry, 0, len(s.bookings))
	for _, b := range s.bookings {
		if owner != anyUser && b.owner != owner {
			continue
		}
		vt := b.CreatedAt
		if b.UpdatedAt != nil {
			vt = *b.UpdatedAt
		}
		out = append(out, JournalEntry{UID: b.UID, ID: b.ID, Username: s.users[b.owner].Username,
			Status: b.Status, VersionTime: vt, Booking: s.renderJSON(b)})
	}
	return out
}

// Create adds a booking of the default user now and returns its uid.
func (s *Server) Create() string { return s.create(0) }

func (s *Server) create(owner int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newBooking(s.tick(), owner).UID
}

// Cancel cancels a booking of any user; false if unknown or already
// cancelled.
func (s *Server) Cancel(uid, reason string) bool { return s.cancelUID(uid, reason, anyUser) }

func (s *Server) cancelUID(uid, reason string, owner int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byUID[uid]
	if !ok || b.Status == "cancelled" || owner != anyUser && b.owner != owner {
		return false
	}
	t := s.tick()
	s.cancel(b, t, reason)
	s.emit(TriggerBookingCancelled, b, t, nil)
	return true
}

// Reschedule moves a booking of any user and returns the new booking's
// uid; "" if unknown or cancelled.
func (s *Server) Reschedule(uid, reason string) string { return s.rescheduleUID(uid, reason, anyUser) }

func (s *Server) rescheduleUID(uid, reason string, owner int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byUID[uid]
	if !ok || b.Status == "cancelled" || owner != anyUser && b.owner != owner {
		return ""
	}
	t := s.tick()
	nb := s.reschedule(b, t, reason)
	s.emit(TriggerBookingRescheduled, nb, t, b)
	return nb.UID
}

// Churn makes n random changes, each to a random user's bookings.
func (s *Server) Churn(n int) { s.churnN(n, anyUser) }

func (s *Server) churnN(n, owner int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		u := owner
		switch {
		case u != anyUser:
		case len(s.users) == 1:
			u = 0 // draws nothing, so a single user's sequence stays as it was
		default:
			u = s.rnd.IntN(len(s.users))
		}
		s.churn(u)
	}
}

// routeAdmin serves the admin endpoints scripts and tests call:
//
//	POST /_admin/bookings                      create one now, → {"uid", "id", "username", "createdAt"}
//	POST /_admin/bookings/{uid}/cancel         → 204 / 404
//	POST /_admin/bookings/{uid}/reschedule     → {"uid": new uid} / 404
//	POST /_admin/churn?n=5                     random changes
//	POST /_admin/expire-access-tokens          every access token expires
//	POST /_admin/revoke-refresh-tokens         every refresh token is refused
//	POST /_admin/deny?error=access_denied      authorizations fail ("" approves)
//	GET  /_admin/journal                       every booking's latest version
//	GET  /_admin/stats                         counters
//
// and the same for one user (404 for an unknown username):
//
//	POST /_admin/users/{username}/bookings
//	POST /_admin/users/{username}/churn?n=5
//	POST /_admin/users/{username}/revoke-refresh-tokens
//	GET  /_admin/users/{username}/journal
//	GET  /_admin/users/{username}/stats
func (s *Server) routeAdmin() {
	s.mux.HandleFunc("POST /_admin/bookings", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, s.CreateBooking())
	})
	s.mux.HandleFunc("POST /_admin/bookings/{uid}/cancel", func(w http.ResponseWriter, r *http.Request) {
		if !s.Cancel(r.PathValue("uid"), r.URL.Query().Get("reason")) {
			http.Error(w, "unknown or cancelled booking", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("POST /_admin/bookings/{uid}/reschedule", func(w http.ResponseWriter, r *http.Request) {
		nu := s.Reschedule(r.PathValue("uid"), r.URL.Query().Get("reason"))
		if nu == "" {
			http.Error(w, "unknown or cancelled booking", http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]string{"uid": nu})
	})
	s.mux.HandleFunc("POST /_admin/churn", func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if v := r.URL.Query().Get("n"); v != "" {
			if err := json.Unmarshal([]byte(v), &n); err != nil || n < 0 {
				http.Error(w, "n must be a count", http.StatusBadRequest)
				return
			}
		}
		s.Churn(n)
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("POST /_admin/expire-access-tokens", func(w http.ResponseWriter, _ *http.Request) {
		s.ExpireAccessTokens()
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("POST /_admin/revoke-refresh-tokens", func(w http.ResponseWriter, _ *http.Request) {
		s.RevokeRefreshTokens()
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("POST /_admin/deny", func(w http.ResponseWriter, r *http.Request) {
		s.DenyAuthorizations(r.URL.Query().Get("error"))
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("GET /_admin/journal", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Journal()) })
	s.mux.HandleFunc("GET /_admin/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) })

	user := func(h func(w http.ResponseWriter, r *http.Request, a *UserAdmin)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			a, err := s.ForUser(r.PathValue("username"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			h(w, r, a)
		}
	}
	s.mux.HandleFunc("POST /_admin/users/{username}/bookings", user(func(w http.ResponseWriter, _ *http.Request, a *UserAdmin) {
		writeJSON(w, a.CreateBooking())
	}))
	s.mux.HandleFunc("POST /_admin/users/{username}/churn", user(func(w http.ResponseWriter, r *http.Request, a *UserAdmin) {
		n := 1
		if v := r.URL.Query().Get("n"); v != "" {
			if err := json.Unmarshal([]byte(v), &n); err != nil || n < 0 {
				http.Error(w, "n must be a count", http.StatusBadRequest)
				return
			}
		}
		a.Churn(n)
		w.WriteHeader(http.StatusNoContent)
	}))
	s.mux.HandleFunc("POST /_admin/users/{username}/revoke-refresh-tokens", user(func(w http.ResponseWriter, _ *http.Request, a *UserAdmin) {
		a.RevokeRefreshTokens()
		w.WriteHeader(http.StatusNoContent)
	}))
	s.mux.HandleFunc("GET /_admin/users/{username}/journal", user(func(w http.ResponseWriter, _ *http.Request, a *UserAdmin) {
		writeJSON(w, a.Journal())
	}))
	s.mux.HandleFunc("GET /_admin/users/{username}/stats", user(func(w http.ResponseWriter, _ *http.Request, a *UserAdmin) {
		writeJSON(w, a.Stats())
	}))
}
