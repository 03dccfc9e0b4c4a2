package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/schedsim"
)

// sim is a scheduling API simulator on loopback with a record of the access
// tokens each API request carried.
type sim struct {
	*schedsim.Server
	srv *httptest.Server

	mu   sync.Mutex
	used []string // access tokens of /v2/ requests, in arrival order
	seq  *atomic.Int64
	at   map[string]int64 // access token → sequence number of its first use
}

func newSim(t *testing.T, cfg schedsim.Config) *sim {
	t.Helper()
	s := &sim{Server: schedsim.New(cfg), seq: new(atomic.Int64), at: map[string]int64{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/") && r.URL.Path != schedsim.PathToken {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			s.mu.Lock()
			s.used = append(s.used, tok)
			if _, ok := s.at[tok]; !ok {
				s.at[tok] = s.seq.Add(1)
			}
			s.mu.Unlock()
		}
		s.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sim) firstUse(tok string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.at[tok]
	return n, ok
}

// client returns the simulator's OAuth client by id.
func (s *sim) client(t *testing.T, id string) schedsim.Client {
	t.Helper()
	for _, c := range s.Clients() {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no client %s", id)
	return schedsim.Client{}
}

// config is an oauth.Config for the simulator's client id.
func (s *sim) config(t *testing.T, id string) Config {
	c := s.client(t, id)
	cfg := Config{
		AuthURL:     s.srv.URL + schedsim.PathAuthorize,
		TokenURL:    s.srv.URL + schedsim.PathToken,
		ClientID:    c.ID,
		RedirectURI: "http://127.0.0.1:0/callback",
		Public:      c.Public,
		Legacy:      c.Legacy,
		MinBackoff:  time.Millisecond,
		MaxBackoff:  5 * time.Millisecond,
	}
	if len(c.Secrets) > 0 {
		cfg.ClientSecret = c.Secrets[0]
	}
	if !c.Legacy {
		cfg.Scopes = []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead}
	}
	return cfg
}

// secretsOf lists every secret a test must never print.
func (s *sim) secretsOf(t *testing.T, toks ...Token) []string {
	var out []string
	for _, c := range s.Clients() {
		out = append(out, c.Secrets...)
	}
	for _, tk := range toks {
		out = append(out, tk.AccessToken, tk.RefreshToken, tk.CodeVerifier)
	}
	return out
}

// login runs the browser flow against the simulator: the receiver listens,
// a plain HTTP client plays the browser and follows the redirect.
func login(t *testing.T, cfg Config) (Token, *Client) {
	t.Helper()
	rcv, err := Listen(cfg.RedirectURI)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg.RedirectURI = rcv.RedirectURI()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := c.NewAuthRequest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		resp, err := http.Get(ar.URL)
		if err == nil {
			resp.Body.Close()
		}
	}()
	code, err := rcv.Wait(ctx, ar.State)
	if err != nil {
		t.Fatalf("wait for the redirect: %v", err)
	}
	tok, err := c.Exchange(ctx, code, ar.Verifier)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok, c
}

// memStore is a TokenStore in memory, with a switch to make Save fail and a
// record of every saved access token's sequence number (shared with the
// simulator's use record, so "saved before used" can be checked).
type memStore struct {
	mu      sync.Mutex
	tok     *Token
	failing bool
	saves   int
	seq     *atomic.Int64
	savedAt map[string]int64
	// hold, when set, is called at the start of every Save, outside the
	// lock: a test parks a refresh there, between the server's rotation
	// and the save.
	hold func()
}

func newMemStore(seq *atomic.Int64, t *Token) *memStore {
	return &memStore{tok: t, seq: seq, savedAt: map[string]int64{}}
}

func (m *memStore) Load(context.Context) (Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok == nil {
		return Token{}, ErrNoToken
	}
	return *m.tok, nil
}

func (m *memStore) Save(_ context.Context, t Token) error {
	if m.hold != nil {
		m.hold()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return errors.New("disk full")
	}
	m.saves++
	m.tok = &t
	if _, ok := m.savedAt[t.AccessToken]; !ok {
		m.savedAt[t.AccessToken] = m.seq.Add(1)
	}
	return nil
}

// del forgets the stored token, as a logout does.
func (m *memStore) del(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tok = nil
	return nil
}

func (m *memStore) stored() *Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tok
}

func (m *memStore) setFailing(b bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failing = b
}

func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// meRequest calls GET /v2/me with the source's token, as an API client does.
func meRequest(t *testing.T, s *sim, ts *TokenSource) int {
	t.Helper()
	req, _ := http.NewRequest("GET", s.srv.URL+schedsim.PathMe, nil)
	if err := ts.Authorize(context.Background(), req); err != nil {
		t.Fatalf("authorize: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// noSecrets fails the test when any text holds a secret; it prints the text
// with the secrets replaced.
func noSecrets(t *testing.T, secrets []string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, sec := range secrets {
			if sec != "" && strings.Contains(text, sec) {
				for _, s2 := range secrets {
					if s2 != "" {
						text = strings.ReplaceAll(text, s2, "[SECRET]")
					}
				}
				t.Errorf("a secret is printed: %s", text)
				break
			}
		}
	}
}
