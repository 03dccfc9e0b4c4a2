package forms

import (
	"crypto/sha256"
	"sync"

	"golang.org/x/time/rate"
)

// Limiters hands out one rate limiter per (base URL, API key): the service
// limits requests per key across all endpoints, so every client of one key
// must draw from the same budget. Safe for concurrent use; the zero value is
// ready to use.
type Limiters struct {
	mu sync.Mutex
	m  map[limiterKey]*rate.Limiter
}

// limiterKey holds a hash of the key, so the registry never keeps the secret.
type limiterKey struct {
	baseURL string
	keyHash [sha256.Size]byte
}

// NewLimiters returns an empty registry.
func NewLimiters() *Limiters { return &Limiters{m: make(map[limiterKey]*rate.Limiter)} }

// get returns the limiter of (baseURL, apiKey), creating it on first use.
// When clients of one key ask for different rates, the stricter rate and
// burst win: the budget is the account's, not the client's.
func (l *Limiters) get(baseURL, apiKey string, r rate.Limit, burst int) *rate.Limiter {
	k := limiterKey{baseURL: baseURL, keyHash: sha256.Sum256([]byte(apiKey))}
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
	lim := rate.NewLimiter(r, burst)
	l.m[k] = lim
	return lim
}
