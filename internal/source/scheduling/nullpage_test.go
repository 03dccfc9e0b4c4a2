package scheduling

import (
	"context"
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
