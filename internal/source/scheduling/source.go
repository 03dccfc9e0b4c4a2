package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// Source is the scheduling API as the app lists its sources: it opens for
// an account that signs in to it (accounts[].scheduling), from the
// scheduling section.
type Source struct{}

var (
	_ source.Source         = Source{}
	_ source.Endpoints      = Source{}
	_ source.Explainer      = (*Account)(nil)
	_ source.WebhookRemover = (*Account)(nil)
)

// Name is the source's name.
func (Source) Name() string { return Name }

// Endpoint is the receiver's side of the source's webhooks.
func (Source) Endpoint() webhook.Endpoint { return Endpoint{} }

// Open opens the account's bookings; nil when the account does not sign
// in to the scheduling API.
func (Source) Open(_ context.Context, env source.Env) (source.Account, error) {
	if !env.Account.Scheduling {
		return nil, nil
	}
	return open(env.Config, env.Account, env.Store, env.Log, env.Observer)
}

// Streams is the bookings, from scheduling.bookings.start_date.
func (a *Account) Streams(context.Context) ([]source.Stream, error) {
	return []source.Stream{{Stream: a.Stream, Start: a.Start.Time}}, nil
}

// Explain names the account in a failed pass of its bookings, and the
// command that fixes a sign-in at fault.
func (a *Account) Explain(account string, err error) error {
	return &SignInError{Account: account, Err: err}
}

// RemoveWebhook deletes the user's webhook of that id (the one syncd
// registered for the bookings).
func (a *Account) RemoveWebhook(ctx context.Context, id string) error {
	return a.Client.DeleteWebhook(ctx, id)
}

// SignInError is a pass of an account's bookings that failed; when the
// sign-in is at fault, it names the command that fixes it for that account.
type SignInError struct {
	Account string
	Err     error
}

func (e *SignInError) Error() string {
	var lr *oauth.LoginRequiredError
	if errors.As(e.Err, &lr) {
		return fmt.Sprintf("account %s: the scheduling API no longer accepts its sign-in (%s): run `syncd auth login --account %s`, or send its user the account's connect link; the other accounts sync", e.Account, lr.Reason, e.Account)
	}
	if errors.Is(e.Err, oauth.ErrNoToken) {
		return fmt.Sprintf("account %s has not signed in to the scheduling API: run `syncd auth login --account %s`, or send its user the account's connect link", e.Account, e.Account)
	}
	return fmt.Sprintf("account %s: %v", e.Account, e.Err)
}

func (e *SignInError) Unwrap() error { return e.Err }

// tokenSecret is where the default account's scheduling API tokens live
// in the state store; another account's are under TokenSecret.
const tokenSecret = "scheduling/oauth"

// TokenSecret is where the scheduling API tokens of the account of
// namespace live in the state store: named like the account's streams
// (namespace/scheduling/oauth), so that a store split by account keeps
// them with the account's state.
func TokenSecret(namespace string) string { return table.StreamKey(namespace, tokenSecret) }

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

// Saver is Save of tok as a function of the context alone.
func (t StateTokens) Saver(tok oauth.Token) func(context.Context) error {
	return func(ctx context.Context) error { return t.Save(ctx, tok) }
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
	if cfg.Scheduling == nil {
		return nil, fmt.Errorf("the configuration has no scheduling section: add one (see configs/syncd.example.yaml) to sync bookings")
	}
	return NewOAuthClientAt(cfg, cfg.Scheduling.RedirectURI, log, obs)
}

// NewOAuthClientAt is the OAuth client of the scheduling section with
// redirect as its redirect URI (the loopback one of `auth login`, or the
// connect page's callback).
func NewOAuthClientAt(cfg *config.Config, redirect string, log *zap.Logger, obs httpapi.Observer) (*oauth.Client, error) {
	s := cfg.Scheduling
	c, err := oauth.NewClient(oauth.Config{
		AuthURL:          s.AuthorizeURL,
		TokenURL:         strings.TrimRight(s.BaseURL, "/") + oauth.TokenPath,
		ClientID:         s.ClientID,
		ClientSecret:     s.ClientSecret.Reveal(),
		ClientSecretNext: s.ClientSecretNext.Reveal(),
		RedirectURI:      redirect,
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

// NewClient is the scheduling API client over tokens.
func NewClient(cfg *config.Config, tokens Tokens, log *zap.Logger, obs httpapi.Observer) (*Client, error) {
	s := cfg.Scheduling
	c, err := New(Config{
		BaseURL: s.BaseURL, Tokens: tokens, RateLimit: s.RateLimit, MaxAttempts: s.MaxAttempts,
		Timeout: s.Timeout.D(), Logger: log.Named("scheduling"), Observer: obs,
	})
	if err != nil {
		return nil, fmt.Errorf("set up the scheduling API client: %w", err)
	}
	return c, nil
}

// Account is the scheduling source opened for an account: its tokens,
// kept alive in the state store, and its bookings stream.
type Account struct {
	Tokens *oauth.TokenSource
	Client *Client
	Stream *Stream
	Start  config.Date
}

// open wires the scheduling source of account ac over store.
func open(cfg *config.Config, ac config.Account, store state.Store, log *zap.Logger, obs httpapi.Observer) (*Account, error) {
	oc, err := NewOAuthClient(cfg, log, obs)
	if err != nil {
		return nil, err
	}
	ns := ac.Namespace()
	tokens := oauth.NewTokenSource(oc, StateTokens{Store: store, Namespace: ns}, oauth.SourceOptions{Logger: log.Named("oauth")})
	counter := &Counter{Next: obs}
	client, err := NewClient(cfg, tokens, log, counter)
	if err != nil {
		return nil, err
	}
	return &Account{Tokens: tokens, Client: client, Stream: NewAccountStream(ns, client, cfg.Scheduling.Bookings.Table, nil, counter),
		Start: cfg.Scheduling.Bookings.StartDate}, nil
}
