package httpapi

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A new process's limiter starts empty: the first request waits its
// interval, so a syncd restarted right after a kill does not add a burst on
// top of the dead one's last second.
func TestLimitersStartEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     rate.Limit
		burst int
		get   func(r rate.Limit, burst int) *rate.Limiter
	}{
		{"NewLimiter", 5, 1, NewLimiter},
		{"NewLimiter burst 3", 5, 3, NewLimiter},
		{"Limiters.Get", 5, 1, func(r rate.Limit, b int) *rate.Limiter { return NewLimiters().Get("http://x", "key", r, b) }},
		{"zero Limiters", 2, 2, func(r rate.Limit, b int) *rate.Limiter { var l Limiters; return l.Get("http://x", "key", r, b) }},
		{"New without a limiter", 5, 1, func(r rate.Limit, b int) *rate.Limiter {
			c, err := New(Config{Name: "test", BaseURL: "http://127.0.0.1:1", RateLimit: float64(r), Burst: b})
			if err != nil {
				t.Fatal(err)
			}
			return c.Limiter()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.get(tc.r, tc.burst)
			now := time.Now()
			if got := lim.TokensAt(now); got > 0.5 {
				t.Errorf("a new limiter holds %.2f tokens, want none", got)
			}
			if lim.AllowN(now, 1) {
				t.Error("a new limiter admits a request at once")
			}
			// It fills at its rate: one interval later a request passes.
			if !lim.AllowN(now.Add(time.Duration(float64(time.Second)/float64(tc.r))+time.Millisecond), 1) {
				t.Error("after one interval the limiter still refuses")
			}
		})
	}
}
