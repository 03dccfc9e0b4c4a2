package app

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// FormsTokenSecret is where the Forms API sign-in (forms_oauth) of the
// account of namespace lives in the state store
// (formsource.TokenSecret).
func FormsTokenSecret(namespace string) string { return formsource.TokenSecret(namespace) }

// legacyFormsTokenSecret is where earlier releases kept the sign-in
// (formsource.LegacyTokenSecret).
func legacyFormsTokenSecret(namespace string) string { return formsource.LegacyTokenSecret(namespace) }

// FormsAuthError is the Forms API refusing a sign-in (the daemon's
// control endpoint answers its status; the client rebuilds it).
type FormsAuthError = forms.AuthError

// ErrNoFormsToken is an account with forms_oauth that has not signed in
// (formsource.ErrNoSignIn).
var ErrNoFormsToken = formsource.ErrNoSignIn

// FormsTokens keeps the Forms API sign-in of one account in the state
// store (formsource.Tokens).
type FormsTokens = formsource.Tokens

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
func FormsLogin(account string) string { return formsource.Login(account) }

// FormsSignInError is an account with forms_oauth whose pass cannot run
// (formsource.SignInError).
type FormsSignInError = formsource.SignInError

// NewTokenClient is the Forms API client of account acct signed in with
// tok (formsource.NewTokenClient).
func NewTokenClient(cfg *config.Config, acct config.Account, tok formsauth.Token, limiters *forms.Limiters, log *zap.Logger, obs forms.Observer) (*forms.Client, error) {
	return formsource.NewTokenClient(cfg, acct, tok, limiters, log, obs)
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

// formsClient is the account's Forms API client now (nil: none).
func (acct *Account) formsClient() *forms.Client {
	if f, ok := acct.jobs.(*formsource.Account); ok {
		return f.Client()
	}
	return nil
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
