package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiters hands out one rate limiter per (base URL, credential): an API
// limits requests per key or per OAuth client across all endpoints, so every
// client of one credential must draw from the same budget. Safe for
// concurrent use; the zero value is ready to use.
type Limiters struct {
	mu sync.Mutex
	m  map[limiterKey]*rate.Limiter
}

// limiterKey holds a hash of the credential, so the registry never keeps a
// secret.
type limiterKey struct {
	baseURL string
	hash    [sha256.Size]byte
}

// NewLimiters returns an empty registry.
func NewLimiters() *Limiters { return &Limiters{m: make(map[limiterKey]*rate.Limiter)} }

// Get returns the limiter of (baseURL, credential), creating it on first
// use. When clients of one credential ask for different rates, the stricter
// rate and burst win: the budget is the account's, not the client's.
func (l *Limiters) Get(baseURL, credential string, r rate.Limit, burst int) *rate.Limiter {
	k := limiterKey{baseURL: baseURL, hash: sha256.Sum256([]byte(credential))}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[limiterKey]*rate.Limiter)
	}
	if lim, ok := l.m[k]; ok {
		if r < lim.Limit() {
			lim.SetLimit(r)
		}
		if burst < lim.Burst() {
			lim.SetBurst(burst)
		}
		return lim
	}
	lim := NewLimiter(r, burst)
	l.m[k] = lim
	return lim
}

// NewLimiter is a limiter of r requests per second and burst that starts
// empty: its first request waits 1/r. A process cannot know what the one
// before it spent: a syncd started right after another was killed (a pod
// restarted, a CronJob replaced) would otherwise add a full burst on top of
// the dead one's last second and draw a 429.
func NewLimiter(r rate.Limit, burst int) *rate.Limiter {
	lim := rate.NewLimiter(r, burst)
	lim.AllowN(time.Now(), burst)
	return lim
}
