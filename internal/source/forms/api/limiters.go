package forms

import (
	"golang.org/x/time/rate"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// Limiters hands out one rate limiter per (base URL, API key): the service
// limits requests per key across all endpoints, so every client of one key
// must draw from the same budget. Safe for concurrent use; the zero value is
// ready to use. The registry keeps a hash of each key, never the key.
type Limiters struct {
	reg httpapi.Limiters
}

// NewLimiters returns an empty registry.
func NewLimiters() *Limiters { return &Limiters{} }

// get returns the limiter of (baseURL, apiKey), creating it on first use.
// When clients of one key ask for different rates, the stricter rate and
// burst win: the budget is the account's, not the client's.
func (l *Limiters) get(baseURL, apiKey string, r rate.Limit, burst int) *rate.Limiter {
	return l.reg.Get(baseURL, apiKey, r, burst)
}
