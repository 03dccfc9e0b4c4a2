package schedsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
)

// staticTokens hands out one access token the test granted directly.
type staticTokens struct{}

func (staticTokens) Token(context.Context) (oauth.Token, error) {
	return oauth.Token{AccessToken: "tie-token", Expiry: time.Now().Add(time.Hour)}, nil
}
func (staticTokens) Invalidate(string) {}

// The client's keyset walk (scheduling.Client.Changes) over bookings that
// tie on one updatedAt across a page boundary, while some of the tied
// bookings it has already passed change (and so leave the window) before
// the next page is asked for. Every booking whose version lies in the
// window at the end must have been passed, with that version: a departure
// shifts the tied rows left, so a next page that skips as many tied rows as
// were seen hides as many unseen ones. The test lives in package schedsim
// because ties need the booking table written directly: the simulator's
// own changes always get a later updatedAt than the last.
func TestChangesKeepTiedBookingsWhenSeenOnesLeave(t *testing.T) {
	tests := []struct {
		name       string
		bookings   int
		tieFrom    int // index of the first booking of the tie group
		tieSize    int
		departures int // of the tied bookings on the first page, changed before the second
	}{
		// The first page (scheduling.MaxTake rows) ends inside the group.
		{"3 tied, 2 seen leave", 400, 248, 3, 2},
		{"10 tied, 5 seen leave", 400, 245, 10, 5},
		{"300 tied, 100 seen leave", 700, 100, 300, 100},
		// A group longer than two pages, nothing leaving: each page must
		// still bring rows not seen yet.
		{"600 tied, none leave", 700, 0, 600, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if first := scheduling.MaxTake - tt.tieFrom; tt.departures > first {
				t.Fatalf("bad case: %d departures but only %d tied bookings on the first page", tt.departures, first)
			}
			s := New(Config{Seed: 1, Bookings: tt.bookings})
			defer s.Close()
			base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
			tie := base.Add(time.Duration(tt.tieFrom) * time.Millisecond)
			s.mu.Lock()
			for i, b := range s.bookings {
				// Created before the window, so only the updatedAt walk sees
				// them; one millisecond apart except the tie group, whose
				// order the API then takes from start.
				b.CreatedAt = base.Add(-time.Hour)
				u := base.Add(time.Duration(i) * time.Millisecond)
				if i >= tt.tieFrom && i < tt.tieFrom+tt.tieSize {
					u = tie
					d := b.End.Sub(b.Start)
					b.Start = base.Add(time.Duration(i) * time.Hour)
					b.End = b.Start.Add(d)
				}
				b.UpdatedAt = &u
			}
			leaving := s.bookings[tt.tieFrom : tt.tieFrom+tt.departures]
			s.access["tie-token"] = &grant{user: 0, expiry: time.Now().Add(time.Hour)}
			s.mu.Unlock()

			var pages atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == PathBookings && pages.Add(1) == 2 {
					s.mu.Lock()
					for _, b := range leaving {
						s.cancel(b, s.tick(), "changed again") // now: after the window
					}
					s.mu.Unlock()
				}
				s.ServeHTTP(w, r)
			}))
			defer srv.Close()
			c, err := scheduling.New(scheduling.Config{BaseURL: srv.URL, Tokens: staticTokens{}, RateLimit: 1000, Burst: 100})
			if err != nil {
				t.Fatal(err)
			}
			start, end := base.Add(-time.Minute), base.Add(time.Second)
			got := map[string]time.Time{}
			err = c.Changes(context.Background(), start, end, func(b *scheduling.Booking) error {
				got[b.UID] = b.VersionTime()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			missing := 0
			for _, j := range s.Journal() {
				if j.VersionTime.Before(start) || !j.VersionTime.Before(end) {
					continue
				}
				if v, ok := got[j.UID]; !ok || !v.Equal(j.VersionTime) {
					if missing++; missing <= 5 {
						t.Errorf("booking %s (version %s, in the window) was not passed with that version: it is lost", j.UID, j.VersionTime.Format(time.RFC3339Nano))
					}
				}
			}
			if want := tt.bookings; len(got) != want {
				t.Errorf("%d bookings passed in %d pages, want %d (%d lost)", len(got), pages.Load(), want, missing)
			}
		})
	}
}
