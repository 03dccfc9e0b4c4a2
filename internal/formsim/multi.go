package formsim

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ServiceRateLimit is the documented limit of the service: 5 requests per
// second per API key, for all endpoints together.
const ServiceRateLimit = 5

// Multi serves many workspaces, each a *Server with its own API key,
// routed by the request's Bearer key (or an OAuth access token of the
// workspace: EnableOAuth), as the real service serves many accounts behind
// one host. It is an http.Handler; its methods are safe for
// concurrent use.
//
// Multi enforces each key's rate limit itself (the key's Config.RateLimit
// and RateBurst; the Server behind it is built without a limiter) and
// measures what it admits, so that a test can check a client's pacing
// against the sim's own clock rather than the client's.
type Multi struct {
	keys []*keyState // in the order given to NewMulti

	oauthMu sync.Mutex
	oauth   *oauthState // nil until EnableOAuth (oauth.go)
}

// keyState is one key: its workspace, limiter and counters.
type keyState struct {
	key []byte
	srv *Server

	mu       sync.Mutex
	revoked  bool
	limiter  *rate.Limiter // nil: unlimited
	window   []time.Time   // admission times within the last second, oldest first
	inFlight int
	// clients counts the requests in flight by client (its User-Agent,
	// which names a syncd process), to see two clients of one key at once.
	clients map[string]int
	seen    map[string]bool // every client that used the key
	stats   KeyStats
}

// KeyStats are the counters of one key.
type KeyStats struct {
	Requests    int64 // every request that carried the key, refused ones too
	RateLimited int64 // answered 429 by the key's limiter (injected 429s are the workspace's: Server.Stats)
	Revoked     int64 // answered 401 because the key was revoked
	Admitted    int64 // passed on to the workspace
	// MaxPerSecond is the most requests admitted in any sliding window of
	// one second (measured at each admission, so it is exact).
	MaxPerSecond int
	// MaxInFlight is the most admitted requests being served at once.
	MaxInFlight int
	// Overlaps counts requests admitted while a request of another client
	// (another User-Agent: another syncd process) was in flight for the
	// key: two processes syncing one account at once.
	Overlaps int64
	// Clients is how many distinct clients (User-Agents) used the key.
	Clients int
}

// NewMulti builds one workspace per Config. Keys must be distinct and non
// empty. A Config's RateLimit and RateBurst become that key's limit in
// Multi (use ServiceRateLimit for the documented one).
func NewMulti(cfgs ...Config) (*Multi, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("formsim: NewMulti needs at least one workspace")
	}
	m := &Multi{}
	seen := map[string]bool{}
	for i, cfg := range cfgs {
		if cfg.APIKey == "" {
			return nil, m.closeAfter(fmt.Errorf("formsim: workspace %d: an API key is required", i))
		}
		if seen[cfg.APIKey] {
			return nil, m.closeAfter(fmt.Errorf("formsim: workspace %d: API key used by an earlier workspace", i))
		}
		seen[cfg.APIKey] = true
		if cfg.RateLimit < 0 || cfg.RateBurst < 0 {
			return nil, m.closeAfter(fmt.Errorf("formsim: workspace %d: RateLimit and RateBurst must not be negative", i))
		}
		ks := &keyState{key: []byte(cfg.APIKey)}
		if cfg.RateLimit > 0 {
			burst := cfg.RateBurst
			if burst == 0 {
				burst = max(1, int(cfg.RateLimit))
			}
			ks.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), burst)
		}
		// One limiter per key, here, where admissions are measured.
		cfg.RateLimit, cfg.RateBurst = 0, 0
		srv, err := New(cfg)
		if err != nil {
			return nil, m.closeAfter(fmt.Errorf("formsim: workspace %d: %w", i, err))
		}
		ks.srv = srv
		m.keys = append(m.keys, ks)
	}
	return m, nil
}

// closeAfter closes the workspaces built so far and returns err.
func (m *Multi) closeAfter(err error) error {
	m.Close()
	return err
}

// Close closes every workspace.
func (m *Multi) Close() error {
	for _, ks := range m.keys {
		ks.srv.Close()
	}
	return nil
}

// Keys lists the API keys in the order given to NewMulti.
func (m *Multi) Keys() []string {
	out := make([]string, len(m.keys))
	for i, ks := range m.keys {
		out[i] = string(ks.key)
	}
	return out
}

// Workspace returns the Server behind key (for its admin methods, faults,
// webhooks and journal), nil for an unknown key. Its Stats count only the
// requests Multi admitted; requests sent to it directly bypass Multi's
// limiter and counters.
func (m *Multi) Workspace(key string) *Server {
	if ks := m.lookup(key); ks != nil {
		return ks.srv
	}
	return nil
}

// Revoke makes key answer 401 from now on, as the service does for a key
// deleted in the account settings. It reports whether the key is known.
func (m *Multi) Revoke(key string) bool {
	ks := m.lookup(key)
	if ks == nil {
		return false
	}
	ks.mu.Lock()
	ks.revoked = true
	ks.mu.Unlock()
	return true
}

// Stats returns the counters of key; false for an unknown key.
func (m *Multi) Stats(key string) (KeyStats, bool) {
	ks := m.lookup(key)
	if ks == nil {
		return KeyStats{}, false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.stats, true
}

// AllStats returns the counters of every key, by key.
func (m *Multi) AllStats() map[string]KeyStats {
	out := make(map[string]KeyStats, len(m.keys))
	for _, ks := range m.keys {
		ks.mu.Lock()
		out[string(ks.key)] = ks.stats
		ks.mu.Unlock()
	}
	return out
}

// lookup finds the workspace of key. Every key is compared, in constant
// time each, so the answer's timing does not tell which key matched.
func (m *Multi) lookup(key string) *keyState {
	var hit *keyState
	for _, ks := range m.keys {
		if subtle.ConstantTimeCompare([]byte(key), ks.key) == 1 {
			hit = ks
		}
	}
	return hit
}

// ServeHTTP routes a request to the workspace of its Bearer key. Order of
// checks, as a single Server's: path (404), key (401), then the key's
// revocation (401) and rate limit (429), then the workspace.
func (m *Multi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		m.serveAdmin(w, r)
		return
	}
	if m.serveOAuth(w, r) {
		return
	}
	if !strings.HasPrefix(r.URL.Path, BasePath+"/") {
		writeMsg(w, msg(http.StatusNotFound, "Not found"), "")
		return
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var ks *keyState
	if ok {
		ks = m.lookup(key)
	}
	if ks == nil && ok {
		// An OAuth access token authorizes its workspace as its key does,
		// under the same limiter and counters.
		var invalidated bool
		if ks, invalidated = m.tokenWorkspace(key); invalidated {
			ks.refuseInvalidated()
			writeMsg(w, msg(http.StatusUnauthorized, "Unauthorized: access token has been invalidated"), "")
			return
		}
		if ks != nil {
			// The workspace checks its key: hand it the key the token stands for.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+string(ks.key))
		}
	}
	if ks == nil {
		writeMsg(w, msg(http.StatusUnauthorized, "Unauthorized: missing or invalid API key"), "")
		return
	}
	client := r.Header.Get("User-Agent")
	switch ks.admit(time.Now(), client) {
	case refusedRevoked:
		writeMsg(w, msg(http.StatusUnauthorized, "Unauthorized: API key has been revoked"), "")
		return
	case refusedRateLimited:
		writeMsg(w, msg(http.StatusTooManyRequests, "Rate limit exceeded"), retryAfter(ks.srv.Faults().RetryAfter))
		return
	}
	defer ks.done(client)
	ks.srv.ServeHTTP(w, r)
}

type admission int

const (
	admitted admission = iota
	refusedRevoked
	refusedRateLimited
)

// admit decides on one request at now and records it. The limiter and the
// window see the same instant under one lock, so the measured window is
// exactly what the limiter let through, whatever the concurrency.
func (ks *keyState) admit(now time.Time, client string) admission {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.stats.Requests++
	if ks.revoked {
		ks.stats.Revoked++
		return refusedRevoked
	}
	if ks.limiter != nil && !ks.limiter.AllowN(now, 1) {
		ks.stats.RateLimited++
		return refusedRateLimited
	}
	ks.stats.Admitted++
	// The window is (now-1s, now]: drop what is a second old or older.
	cut := 0
	for cut < len(ks.window) && !ks.window[cut].After(now.Add(-time.Second)) {
		cut++
	}
	ks.window = append(slices.Delete(ks.window, 0, cut), now)
	ks.stats.MaxPerSecond = max(ks.stats.MaxPerSecond, len(ks.window))
	ks.inFlight++
	ks.stats.MaxInFlight = max(ks.stats.MaxInFlight, ks.inFlight)
	if ks.clients == nil {
		ks.clients = map[string]int{}
	}
	if ks.inFlight > ks.clients[client]+1 {
		ks.stats.Overlaps++ // another client has a request in flight
	}
	ks.clients[client]++
	if ks.seen == nil {
		ks.seen = map[string]bool{}
	}
	if !ks.seen[client] {
		ks.seen[client] = true
		ks.stats.Clients++
	}
	return admitted
}

// done ends an admitted request of client.
func (ks *keyState) done(client string) {
	ks.mu.Lock()
	ks.inFlight--
	if ks.clients[client]--; ks.clients[client] == 0 {
		delete(ks.clients, client)
	}
	ks.mu.Unlock()
}

// writeMsg writes an answer of Multi's own, with the headers a Server's
// answers carry.
func writeMsg(w http.ResponseWriter, resp response, retry string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(resp.body)))
	if retry != "" {
		h.Set("Retry-After", retry)
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body) // a client that left is not an error of ours
}

// serveAdmin serves the admin endpoints of each workspace under
// /_admin/accounts/{apiKey}/ (the Server's AdminPrefix endpoints), and
// PUT /_admin/webhook-faults, which sets every workspace's delivery faults.
func (m *Multi) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == AdminPrefix+"webhook-faults" && r.Method == http.MethodPut {
		f, err := readFaults(r)
		for _, ks := range m.keys {
			if err == nil {
				err = ks.srv.SetWebhookFaults(f)
			}
		}
		if err != nil {
			adminError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, AdminPrefix+"accounts/")
	key, sub, _ := strings.Cut(rest, "/")
	var ks *keyState
	if ok {
		ks = m.lookup(key)
	}
	if ks == nil {
		adminError(w, http.StatusNotFound, "no such admin endpoint or account: use /_admin/accounts/{apiKey}/...")
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = AdminPrefix + sub
	r2.URL.RawPath = ""
	ks.srv.admin.ServeHTTP(w, r2)
}
