package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/state"
)

// tokenSecret is where the default account's scheduling API tokens live
// in the state store; another account's are under TokenSecret.
const tokenSecret = "scheduling/oauth"

// TokenSecret is where the scheduling API tokens of the account of
// namespace live in the state store.
func TokenSecret(namespace string) string {
	if namespace == "" {
		return tokenSecret
	}
	return tokenSecret + "/" + namespace
}

// secretNames are what the sources of cfg's accounts keep in the state
// store (their sign-ins): a restore of an older state keeps the newer
// values (KeepSecrets).
func secretNames(cfg *config.Config) []string {
	var out []string
	for _, a := range cfg.AccountList() {
		if a.Scheduling {
			out = append(out, TokenSecret(a.Namespace()))
		}
	}
	return out
}

// KeepSecrets reads the sign-ins the state at cfg holds now, and returns
// what puts them back: a restore replaces the state with a backup, whose
// refresh tokens were rotated since and are spent (the next pass would fail
// with invalid_grant), so the newer ones stay. A state that does not exist
// or holds none keeps the backup's.
func KeepSecrets(ctx context.Context, cfg *config.Config) (func(ctx context.Context, store state.Store) (int, error), error) {
	kept := map[string][]byte{}
	store, err := OpenStore(ctx, cfg, true)
	if err == nil {
		for _, name := range secretNames(cfg) {
			v, gerr := store.GetSecret(ctx, name)
			if gerr != nil {
				store.Close()
				return nil, fmt.Errorf("read the sign-ins of the state before the restore: %w", gerr)
			}
			if v != nil {
				kept[name] = v
			}
		}
		store.Close()
	}
	return func(ctx context.Context, store state.Store) (int, error) {
		for name, v := range kept {
			if err := store.PutSecret(ctx, name, v); err != nil {
				return 0, fmt.Errorf("keep the newer sign-in %s: %w", name, err)
			}
		}
		return len(kept), nil
	}, nil
}

// StateTokens keeps the scheduling API's tokens of one account in the
// state store (the bbolt file, mode 0600, or the state object): an
// oauth.TokenStore whose Save is durable before it returns.
type StateTokens struct {
	Store state.Store
	// Namespace is the account's (empty: the default account).
	Namespace string
}

// Load returns the stored tokens, or oauth.ErrNoToken.
func (t StateTokens) Load(ctx context.Context) (oauth.Token, error) {
	raw, err := t.Store.GetSecret(ctx, TokenSecret(t.Namespace))
	if err != nil {
		return oauth.Token{}, fmt.Errorf("read the scheduling API's tokens from the state: %w", err)
	}
	if raw == nil {
		return oauth.Token{}, oauth.ErrNoToken
	}
	var tok oauth.Token
	if err := json.Unmarshal(raw, &tok); err != nil {
		return oauth.Token{}, fmt.Errorf("the scheduling API's tokens in the state cannot be read (%v): run `syncd auth login` again", err)
	}
	return tok, nil
}

// Save stores tok durably.
func (t StateTokens) Save(ctx context.Context, tok oauth.Token) error {
	raw, err := json.Marshal(tok)
	if err != nil {
		return fmt.Errorf("encode the scheduling API's tokens: %w", err)
	}
	if err := t.Store.PutSecret(ctx, TokenSecret(t.Namespace), raw); err != nil {
		return fmt.Errorf("store the scheduling API's tokens: %w", err)
	}
	return nil
}

// Delete forgets the tokens.
func (t StateTokens) Delete(ctx context.Context) error {
	if err := t.Store.PutSecret(ctx, TokenSecret(t.Namespace), nil); err != nil {
		return fmt.Errorf("forget the scheduling API's tokens: %w", err)
	}
	return nil
}

// NewOAuthClient is the OAuth client the scheduling section describes.
func NewOAuthClient(cfg *config.Config, log *zap.Logger, obs httpapi.Observer) (*oauth.Client, error) {
	s := cfg.Scheduling
	if s == nil {
		return nil, fmt.Errorf("the configuration has no scheduling section: add one (see configs/syncd.example.yaml) to sync bookings")
	}
	c, err := oauth.NewClient(oauth.Config{
		AuthURL:          s.AuthorizeURL,
		TokenURL:         strings.TrimRight(s.BaseURL, "/") + oauth.TokenPath,
		ClientID:         s.ClientID,
		ClientSecret:     s.ClientSecret.Reveal(),
		ClientSecretNext: s.ClientSecretNext.Reveal(),
		RedirectURI:      s.RedirectURI,
		Scopes:           s.Scopes,
		Public:           s.ClientSecret == "",
		Legacy:           len(s.Scopes) == 0,
		Timeout:          s.Timeout.D(),
		MaxAttempts:      s.MaxAttempts,
		Logger:           log.Named("oauth"),
		Observer:         obs,
	})
	if err != nil {
		return nil, fmt.Errorf("set up the OAuth client of the scheduling API: %w", err)
	}
	return c, nil
}

// NewSchedulingClient is the scheduling API client over tokens.
func NewSchedulingClient(cfg *config.Config, tokens scheduling.Tokens, log *zap.Logger, obs httpapi.Observer) (*scheduling.Client, error) {
	s := cfg.Scheduling
	c, err := scheduling.New(scheduling.Config{
		BaseURL: s.BaseURL, Tokens: tokens, RateLimit: s.RateLimit, MaxAttempts: s.MaxAttempts,
		Timeout: s.Timeout.D(), Logger: log.Named("scheduling"), Observer: obs,
	})
	if err != nil {
		return nil, fmt.Errorf("set up the scheduling API client: %w", err)
	}
	return c, nil
}

// Scheduling is the open scheduling source: its tokens, kept alive in the
// state store, and its bookings stream.
type Scheduling struct {
	Tokens *oauth.TokenSource
	Client *scheduling.Client
	Stream *scheduling.Stream
	Start  config.Date
}

// openScheduling wires the scheduling source of account ac over store.
func openScheduling(cfg *config.Config, ac config.Account, store state.Store, log *zap.Logger, obs httpapi.Observer) (*Scheduling, error) {
	oc, err := NewOAuthClient(cfg, log, obs)
	if err != nil {
		return nil, err
	}
	ns := ac.Namespace()
	tokens := oauth.NewTokenSource(oc, StateTokens{Store: store, Namespace: ns}, oauth.SourceOptions{Logger: log.Named("oauth")})
	counter := &scheduling.Counter{Next: obs}
	client, err := NewSchedulingClient(cfg, tokens, log, counter)
	if err != nil {
		return nil, err
	}
	return &Scheduling{Tokens: tokens, Client: client, Stream: scheduling.NewAccountStream(ns, client, cfg.Scheduling.Bookings.Table, nil, counter),
		Start: cfg.Scheduling.Bookings.StartDate}, nil
}

// CheckSignIn asks the token endpoint whether the stored sign-in still
// works, by refreshing it (the rotated pair is saved, as every refresh
// saves it): a token that merely looks valid here may have been revoked at
// the server. It returns the fresh token, or the stored one with the
// error that says what to do (`syncd auth login` for a revoked or expired
// sign-in).
func CheckSignIn(ctx context.Context, cfg *config.Config, namespace string, store state.Store, log *zap.Logger) (oauth.Token, error) {
	tokens := StateTokens{Store: store, Namespace: namespace}
	stored, err := tokens.Load(ctx)
	if err != nil {
		return stored, err
	}
	oc, err := NewOAuthClient(cfg, log, nil)
	if err != nil {
		return stored, err
	}
	fresh, err := oc.Refresh(ctx, stored)
	if err != nil {
		return stored, err
	}
	if err := tokens.Save(ctx, fresh); err != nil {
		return stored, fmt.Errorf("save the rotated refresh token: %w", err)
	}
	return fresh, nil
}
