package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// TokenSource hands out access tokens for API calls. It is safe for
// concurrent use; however many goroutines ask at once, at most one refresh
// is in flight, and the others get its result.
//
// The order of a refresh is what makes it crash-safe: the rotated pair is
// saved to the store before the new access token is handed out. If the save
// fails, the call fails and the pair is kept in memory only to be saved
// again by the next call; it is never used before it is durable.
type TokenSource struct {
	client *Client
	store  TokenStore
	skew   time.Duration
	now    func() time.Time
	log    *zap.Logger

	sem chan struct{} // one load-or-refresh at a time

	mu      sync.Mutex
	cur     *Token // saved and handed out
	pending *Token // received, not yet saved: never handed out
	refused string // an access token the API refused (401): refresh it
}

// SourceOptions tune a TokenSource; zero values take the defaults.
type SourceOptions struct {
	// Skew: a token is refreshed this long before it expires (default 2m,
	// for tokens that live 30m); also covers clock drift.
	Skew   time.Duration
	Now    func() time.Time
	Logger *zap.Logger
}

// NewTokenSource returns a source over store, refreshing through client.
func NewTokenSource(client *Client, store TokenStore, opts SourceOptions) *TokenSource {
	s := &TokenSource{client: client, store: store, skew: opts.Skew, now: opts.Now, log: opts.Logger, sem: make(chan struct{}, 1)}
	if s.skew <= 0 {
		s.skew = DefaultSkew
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	return s
}

// usable is the cached token when it can be handed out as is.
func (s *TokenSource) usable() (Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.AccessToken != s.refused && s.cur.Fresh(s.now(), s.skew) {
		return *s.cur, true
	}
	return Token{}, false
}

// Token returns a token whose access token is fresh for at least the skew,
// refreshing (and saving) it first when needed.
func (s *TokenSource) Token(ctx context.Context) (Token, error) {
	if t, ok := s.usable(); ok {
		return t, nil
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return Token{}, fmt.Errorf("oauth: wait for the token refresh in progress: %w", ctx.Err())
	}
	defer func() { <-s.sem }()
	if t, ok := s.usable(); ok { // another goroutine refreshed meanwhile
		return t, nil
	}
	s.mu.Lock()
	pending, refused := s.pending, s.refused
	s.mu.Unlock()

	if pending != nil {
		// A rotated pair whose save failed: the server has already retired
		// the stored refresh token, so saving this one is the only way on.
		if err := s.store.Save(ctx, *pending); err != nil {
			s.log.Error("the rotated refresh token still cannot be saved: it is kept in memory and saved at the next try; if syncd stops before, the sign-in is lost and needs `syncd auth login`",
				zap.String(logkey.ClientID, s.client.cfg.ClientID), zap.Error(err))
			return Token{}, fmt.Errorf("oauth: save the rotated refresh token (again): %w; the new access token is not used until it is saved", err)
		}
		s.adopt(*pending)
		if pending.Fresh(s.now(), s.skew) && pending.AccessToken != refused {
			return *pending, nil
		}
	}

	stored, err := s.store.Load(ctx)
	if errors.Is(err, ErrNoToken) {
		return Token{}, &LoginRequiredError{ClientID: s.client.cfg.ClientID, Reason: "no token is stored"}
	}
	if err != nil {
		return Token{}, fmt.Errorf("oauth: load the stored token: %w", err)
	}
	if stored.AccessToken != refused && stored.Fresh(s.now(), s.skew) {
		s.adopt(stored)
		return stored, nil
	}
	fresh, err := s.client.Refresh(ctx, stored)
	if err != nil {
		return Token{}, err
	}
	if err := s.store.Save(ctx, fresh); err != nil {
		s.mu.Lock()
		s.pending = &fresh
		s.mu.Unlock()
		// Loud: the server has retired the stored refresh token, so this
		// process holds the only working one until a save succeeds.
		s.log.Error("the scheduling API rotated the refresh token and the new one could not be saved: it is kept in memory and saved at the next try; if syncd stops before, the sign-in is lost and needs `syncd auth login`",
			zap.String(logkey.ClientID, s.client.cfg.ClientID), zap.Error(err))
		return Token{}, fmt.Errorf("oauth: save the rotated refresh token: %w; the new access token is not used until it is saved", err)
	}
	s.adopt(fresh)
	s.log.Debug("scheduling API token refreshed", zap.Time(logkey.Expiry, fresh.Expiry))
	return fresh, nil
}

// adopt makes t the token handed out.
func (s *TokenSource) adopt(t Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.pending = &t, nil
	if s.refused == t.AccessToken {
		return
	}
	s.refused = ""
}

// Invalidate reports that the API refused accessToken (a 401 before its
// expiry: revoked, or the clocks disagree); the next Token refreshes.
func (s *TokenSource) Invalidate(accessToken string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = accessToken
}

// Replace runs write, a change to the stored sign-in (a new login, a
// logout), while no refresh is in flight, then drops the token held in
// memory, so that the next Token reads the store. A refresh that began
// before it saves its rotated pair first, and write then replaces it: it
// can never save that pair over what write stored, which would undo a
// logout or bring back the sign-in a new login replaced.
func (s *TokenSource) Replace(ctx context.Context, write func(context.Context) error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("oauth: wait for the token refresh in progress: %w", ctx.Err())
	}
	defer func() { <-s.sem }()
	if err := write(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.pending, s.refused = nil, nil, ""
	return nil
}

// Authorize sets the Authorization header of req: the source is the
// scheduling client's httpapi.Authorizer.
func (s *TokenSource) Authorize(ctx context.Context, req *http.Request) error {
	t, err := s.Token(ctx)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.AccessToken)
	return nil
}

// OAuth2 adapts the source to golang.org/x/oauth2's TokenSource, for
// libraries that take one. ctx bounds every refresh it makes.
func (s *TokenSource) OAuth2(ctx context.Context) oauth2.TokenSource { return oauth2Adapter{ctx, s} }

type oauth2Adapter struct {
	ctx context.Context
	s   *TokenSource
}

func (a oauth2Adapter) Token() (*oauth2.Token, error) {
	t, err := a.s.Token(a.ctx)
	if err != nil {
		return nil, err
	}
	return &oauth2.Token{AccessToken: t.AccessToken, TokenType: "Bearer", RefreshToken: t.RefreshToken, Expiry: t.Expiry}, nil
}
