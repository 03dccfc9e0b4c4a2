package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/schedsim"
)

// rewritingFront puts a proxy before the simulator whose token endpoint
// answers get edit applied to their JSON object.
func rewritingFront(t *testing.T, s *sim, edit func(m map[string]any)) string {
	t.Helper()
	target, _ := url.Parse(s.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(res *http.Response) error {
		if res.Request.URL.Path != schedsim.PathToken || res.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		edit(m)
		nb, _ := json.Marshal(m)
		res.Body = io.NopCloser(bytes.NewReader(nb))
		res.ContentLength = int64(len(nb))
		res.Header.Set("Content-Length", strconv.Itoa(len(nb)))
		return nil
	}
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)
	return front.URL
}

// TestRefreshAnswerWithScopeListKeepsTheSession: the spec leaves the token
// answer's fields open; an answer whose access and refresh tokens are
// readable but whose scope is a JSON list (as several OAuth servers send it)
// must be kept. It was thrown away whole ("not JSON"); the service had
// rotated the refresh token by then, so the sign-in was lost: the next
// refresh was refused with invalid_grant until `syncd auth login` again.
func TestRefreshAnswerWithScopeListKeepsTheSession(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 5})
	cfg := s.config(t, "sim-client")
	tok, _ := login(t, cfg)
	front := rewritingFront(t, s, func(m map[string]any) {
		m["scope"] = []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead}
	})
	cfg.TokenURL = front + schedsim.PathToken
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := newMemStore(s.seq, &tok)
	ts := NewTokenSource(c, store, SourceOptions{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	_, err = ts.Token(context.Background())
	if err != nil {
		t.Errorf("a refresh answer with both tokens and a scope list was refused: %v", err)
	}
	// What the refusal costs: the stored refresh token is spent.
	_, err2 := ts.Token(context.Background())
	if errors.Is(err2, ErrLoginRequired) {
		t.Errorf("the sign-in is lost after that answer: %v", err2)
	}
}

// TestHugeExpiresInDoesNotRefreshOnEveryCall: an expires_in too large for
// a time.Duration overflowed to a negative lifetime, so the token was never
// fresh: every Token call refreshed (and rotated) the pair, where "syncd
// refreshes it two minutes before it expires" promises one refresh.
func TestHugeExpiresInDoesNotRefreshOnEveryCall(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 5})
	cfg := s.config(t, "sim-client")
	tok, _ := login(t, cfg)
	front := rewritingFront(t, s, func(m map[string]any) { m["expires_in"] = 10000000000 })
	cfg.TokenURL = front + schedsim.PathToken
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok.Expiry = time.Now().Add(-time.Minute) // due for a refresh
	ts := NewTokenSource(c, newMemStore(s.seq, &tok), SourceOptions{})
	before := s.Stats().Refreshes
	for i := 0; i < 3; i++ {
		got, err := ts.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !got.Expiry.After(got.IssuedAt) {
			t.Errorf("expires_in 10000000000 gave an expiry %s before the issue time %s", got.Expiry, got.IssuedAt)
		}
	}
	if n := s.Stats().Refreshes - before; n != 1 {
		t.Errorf("%d refreshes for 3 Token calls right after one another, want 1", n)
	}
}
