package scheduling

import (
	"context"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestNullBookingsPageIsNotAnEmptyWindow: a 200 whose data is null (not a
// list) while its pagination says bookings are there is a malformed page,
// and an error. Changes read it as "no bookings" and returned nil, so the
// poller committed the window and its bookings were never read again (the
// README: "a committed window is never read again").
func TestNullBookingsPageIsNotAnEmptyWindow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":null,"pagination":{"totalItems":3,"remainingItems":3,"returnedItems":0,"itemsPerPage":250,"currentPage":1,"totalPages":1,"hasNextPage":true,"hasPreviousPage":false}}`))
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, Tokens: fixedTokens{"at"}, RateLimit: 1000, MaxAttempts: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(-time.Hour)
	n := 0
	err = c.Changes(context.Background(), end.Add(-24*time.Hour), end, func(*Booking) error { n++; return nil })
	if err == nil {
		t.Errorf("a page with data null (pagination: 3 bookings, hasNextPage) read as %d bookings and no error: the window would be committed empty", n)
	}
}

// TestPagesShorterThanAskedAreFollowed: a service that serves fewer
// bookings a page than asked (a lower cap on take) while its pagination
// says more follow must be read to the end. The walk took any short page
// for the last one, and the rest of the window was committed without its
// bookings.
func TestPagesShorterThanAskedAreFollowed(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 5, Bookings: 40})
	capped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/bookings" {
			q := r.URL.Query()
			q.Set("take", "7")
			r.URL.RawQuery = q.Encode()
		}
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(capped.Close)
	e.srv = capped
	c, _ := e.client(t, "sim-legacy")
	end := time.Now().Add(-time.Millisecond)
	got := map[string]bool{}
	if err := c.Changes(context.Background(), time.Unix(0, 0), end, func(b *Booking) error { got[b.UID] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, j := range e.sim.Journal() {
		if j.VersionTime.Before(end) {
			want++
			if !got[j.UID] {
				t.Errorf("booking %s (version %s) was not read", j.UID, j.VersionTime)
			}
		}
	}
	if want < 20 {
		t.Fatalf("the simulator holds %d bookings: too few to need several pages", want)
	}
}
