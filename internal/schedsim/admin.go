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
	Status      string          `json:"status"`
	VersionTime time.Time       `json:"version_time"` // updatedAt, or createdAt when null
	Booking     json.RawMessage `json:"booking"`
}

// Journal returns every booking's latest version, ordered by id.
func (s *Server) Journal() []JournalEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JournalEntry, 0, len(s.bookings))
	for _, b := range s.bookings {
		vt := b.CreatedAt
		if b.UpdatedAt != nil {
			vt = *b.UpdatedAt
		}
		out = append(out, JournalEntry{UID: b.UID, ID: b.ID, Status: b.Status, VersionTime: vt, Booking: s.renderJSON(b)})
	}
	return out
}

// Create adds a booking now and returns its uid.
func (s *Server) Create() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.makeBooking(s.tick()).UID
}

// Cancel cancels a booking; false if unknown or already cancelled.
func (s *Server) Cancel(uid, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byUID[uid]
	if !ok || b.Status == "cancelled" {
		return false
	}
	s.cancel(b, s.tick(), reason)
	return true
}

// Reschedule moves a booking and returns the new booking's uid; "" if
// unknown or cancelled.
func (s *Server) Reschedule(uid, reason string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byUID[uid]
	if !ok || b.Status == "cancelled" {
		return ""
	}
	return s.reschedule(b, s.tick(), reason).UID
}

// Churn makes n random changes.
func (s *Server) Churn(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.churn()
	}
}

// routeAdmin serves the admin endpoints scripts and tests call:
//
//	POST /_admin/bookings                      create one, → {"uid": ...}
//	POST /_admin/bookings/{uid}/cancel         → 204 / 404
//	POST /_admin/bookings/{uid}/reschedule     → {"uid": new uid} / 404
//	POST /_admin/churn?n=5                     random changes
//	POST /_admin/expire-access-tokens          every access token expires
//	POST /_admin/revoke-refresh-tokens         every refresh token is refused
//	POST /_admin/deny?error=access_denied      authorizations fail ("" approves)
//	GET  /_admin/journal                       every booking's latest version
//	GET  /_admin/stats                         counters
func (s *Server) routeAdmin() {
	s.mux.HandleFunc("POST /_admin/bookings", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"uid": s.Create()})
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
}
