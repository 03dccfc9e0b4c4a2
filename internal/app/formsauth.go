package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/source"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// formsTokenSecret is where the default account's Forms API sign-in lives
// in the state store; another account's is under FormsTokenSecret.
const formsTokenSecret = "forms-oauth"

// FormsTokenSecret is where the Forms API sign-in (forms_oauth) of the
// account of namespace lives in the state store: named like the account's
// streams (namespace/forms-oauth), so that a store split by account
// (state.url with sharding) keeps it with the account's state.
func FormsTokenSecret(namespace string) string { return table.StreamKey(namespace, formsTokenSecret) }

// legacyFormsTokenSecret is where earlier releases kept the sign-in
// (forms/oauth, forms/oauth/NAME). A store split by account took its
// "forms/" for an account named forms, which no syncd claims, so only a
// state that is not split can hold one: Load still reads it there, and
// Save and Delete remove it.
func legacyFormsTokenSecret(namespace string) string {
	if namespace == "" {
		return "forms/oauth"
	}
	return "forms/oauth/" + namespace
}

// ErrNoFormsToken is an account with forms_oauth that has not signed in.
var ErrNoFormsToken = errors.New("no Forms API sign-in is stored")

// FormsTokens keeps the Forms API sign-in of one account in the state
// store, as StateTokens keeps its scheduling tokens.
type FormsTokens struct {
	Store state.Store
	// Namespace is the account's (empty: the default account).
	Namespace string
}

// Load returns the stored sign-in, or ErrNoFormsToken.
func (t FormsTokens) Load(ctx context.Context) (formsauth.Token, error) {
	raw, err := t.Store.GetSecret(ctx, FormsTokenSecret(t.Namespace))
	if err != nil {
		return formsauth.Token{}, fmt.Errorf("read the Forms API sign-in from the state: %w", err)
	}
	if raw == nil {
		if raw, err = t.legacy(ctx); err != nil {
			return formsauth.Token{}, err
		}
	}
	if raw == nil {
		return formsauth.Token{}, ErrNoFormsToken
	}
	var tok formsauth.Token
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" || tok.BaseURL == "" {
		return formsauth.Token{}, errors.New("the Forms API sign-in in the state cannot be read: sign in again with `syncd auth login --source forms`")
	}
	return tok, nil
}

// Save stores tok durably.
func (t FormsTokens) Save(ctx context.Context, tok formsauth.Token) error {
	raw, err := json.Marshal(tok)
	if err != nil {
		return fmt.Errorf("encode the Forms API sign-in: %w", err)
	}
	if err := t.Store.PutSecret(ctx, FormsTokenSecret(t.Namespace), raw); err != nil {
		return fmt.Errorf("store the Forms API sign-in: %w", err)
	}
	return t.dropLegacy(ctx)
}

// Delete forgets the sign-in.
func (t FormsTokens) Delete(ctx context.Context) error {
	if err := t.Store.PutSecret(ctx, FormsTokenSecret(t.Namespace), nil); err != nil {
		return fmt.Errorf("forget the Forms API sign-in: %w", err)
	}
	return t.dropLegacy(ctx)
}

// legacy is the sign-in under its earlier name, nil when there is none. A
// store split by account refuses the name (it names no account of it): it
// never held one there.
func (t FormsTokens) legacy(ctx context.Context) ([]byte, error) {
	raw, err := t.Store.GetSecret(ctx, legacyFormsTokenSecret(t.Namespace))
	var nc *state.NotClaimedError
	if errors.As(err, &nc) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the Forms API sign-in from the state: %w", err)
	}
	return raw, nil
}

// dropLegacy removes the sign-in under its earlier name, if any, so that
// a logout forgets it and a new login is the only one left.
func (t FormsTokens) dropLegacy(ctx context.Context) error {
	raw, err := t.legacy(ctx)
	if err != nil || raw == nil {
		return err
	}
	if err := t.Store.PutSecret(ctx, legacyFormsTokenSecret(t.Namespace), nil); err != nil {
		return fmt.Errorf("remove the Forms API sign-in kept under its earlier name: %w", err)
	}
	return nil
}

// NewFormsApp is the Forms API's OAuth app of the forms_oauth section,
// waiting for the code on redirect (the loopback one of `auth login`).
func NewFormsApp(cfg *config.Config, redirect string) (*formsauth.App, error) {
	f := cfg.FormsOAuth
	if f == nil {
		return nil, errors.New("the configuration has no forms_oauth section: add one with the OAuth app's client_id and client_secret (see configs/accounts.example.yaml)")
	}
	a, err := formsauth.New(formsauth.Config{
		AuthorizeURL: f.AuthorizeURL, TokenURL: f.TokenURL, ClientID: f.ClientID, ClientSecret: f.ClientSecret.Reveal(),
		RedirectURI: redirect, Timeout: cfg.Source.Timeout.D(),
	})
	if err != nil {
		return nil, fmt.Errorf("set up the Forms API's OAuth app: %w", err)
	}
	return a, nil
}

// FormsLogin is the command that signs account in to the Forms API.
func FormsLogin(account string) string {
	return "syncd auth login --account " + account + " --source forms"
}

// FormsSignInError is an account with forms_oauth whose pass cannot run:
// not signed in, or its token refused (invalidated). It names the command
// that fixes it; the other accounts sync.
type FormsSignInError struct {
	Account string
	// Err is ErrNoFormsToken, the source's auth failure (*source.Error of
	// kind source.Auth), or what reading the sign-in failed with.
	Err error
}

func (e *FormsSignInError) Error() string {
	ae := source.AsError(e.Err)
	switch {
	case errors.Is(e.Err, ErrNoFormsToken):
		return fmt.Sprintf("account %s has not signed in to the Forms API: run `%s`; the other accounts sync", e.Account, FormsLogin(e.Account))
	case ae != nil && ae.Kind == source.Auth:
		return fmt.Sprintf("account %s: the Forms API at %s no longer accepts its OAuth sign-in (HTTP %d: invalidated, or the app was removed): run `%s`; the other accounts sync",
			e.Account, ae.Where, ae.Status, FormsLogin(e.Account))
	}
	return fmt.Sprintf("account %s: %v: run `%s`", e.Account, e.Err, FormsLogin(e.Account))
}

func (e *FormsSignInError) Unwrap() error { return e.Err }

// NewTokenClient is the Forms API client of account acct signed in with
// tok: the token is its Bearer key and the token's base URL its address
// (it wins over the account's base_url: the sign-in says where the
// workspace lives).
func NewTokenClient(cfg *config.Config, acct config.Account, tok formsauth.Token, limiters *forms.Limiters, log *zap.Logger, obs forms.Observer) (*forms.Client, error) {
	acct.BaseURL = tok.BaseURL
	return newAccountClient(cfg, acct, tok.AccessToken, limiters, log, obs)
}

// CheckFormsToken asks the Forms API whether tok works: GET {base_url}/forms.
func CheckFormsToken(ctx context.Context, cfg *config.Config, acct config.Account, tok formsauth.Token, log *zap.Logger) error {
	c, err := NewTokenClient(cfg, acct, tok, nil, log, nil)
	if err != nil {
		return err
	}
	if _, err := c.ListForms(ctx); err != nil {
		return fmt.Errorf("check the new sign-in with GET %s/forms: %w", tok.BaseURL, err)
	}
	return nil
}

// formsSignIn makes the client of an account with forms_oauth follow the
// sign-in stored now: a pass after `syncd auth login` uses the new token,
// and an account without one fails its pass alone.
func (acct *Account) formsSignIn(ctx context.Context) error {
	tok, err := FormsTokens{Store: acct.app.Store, Namespace: acct.Cfg.Namespace()}.Load(ctx)
	acct.mu.Lock()
	defer acct.mu.Unlock()
	if err != nil {
		acct.Client, acct.formsToken = nil, ""
		return &FormsSignInError{Account: acct.Name, Err: err}
	}
	if acct.Client != nil && acct.formsToken == tok.AccessToken+" "+tok.BaseURL {
		return nil
	}
	c, err := NewTokenClient(acct.app.Cfg, acct.Cfg, tok, acct.app.limiters, acct.Log, acct.app.Metrics.ForAccount(acct.Name))
	if err != nil {
		acct.Client, acct.formsToken = nil, ""
		return &FormsSignInError{Account: acct.Name, Err: err}
	}
	acct.Client, acct.formsToken = c, tok.AccessToken+" "+tok.BaseURL
	return nil
}

// formsClient is the account's Forms API client now (nil: none).
func (acct *Account) formsClient() *forms.Client {
	acct.mu.Lock()
	defer acct.mu.Unlock()
	return acct.Client
}

// ReadClient is the Forms API client of acct for a command that only
// reads the API (forms, validate, a dry run): its key, or, for an account
// with forms_oauth, the sign-in the state holds now. It returns the base
// URL the client uses too (a sign-in's own).
func ReadClient(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger, obs forms.Observer) (*forms.Client, string, error) {
	if !acct.FormsOAuth {
		c, err := NewAccountClient(cfg, acct, nil, log, obs)
		return c, acct.BaseURL, err
	}
	store, err := OpenStore(ctx, cfg, true)
	if err != nil {
		return nil, "", fmt.Errorf("read the Forms API sign-in of account %s: %w", acct.Name, err)
	}
	tok, err := FormsTokens{Store: store, Namespace: acct.Namespace()}.Load(ctx)
	if cerr := store.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the state: %w", cerr)
	}
	if err != nil {
		return nil, "", &FormsSignInError{Account: acct.Name, Err: err}
	}
	c, err := NewTokenClient(cfg, acct, tok, nil, log, obs)
	return c, tok.BaseURL, err
}
