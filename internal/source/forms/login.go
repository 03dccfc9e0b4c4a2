package forms

// The sign-in of `syncd auth login --source forms` (source.Login): the
// authorization-code flow of the forms_oauth section's app, the token
// checked with GET {base_url}/forms and kept in the state (Tokens).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

var _ source.Login = Source{}

// errNoSection is a configuration without forms_oauth: no account signs
// in to the Forms API with OAuth.
var errNoSection = errors.New("the configuration has no forms_oauth section: add one with the OAuth app's client_id and client_secret (see configs/accounts.example.yaml)")

// LoginSection refuses a configuration without a forms_oauth section.
func (Source) LoginSection(cfg *config.Config) error {
	if cfg.FormsOAuth == nil {
		return errNoSection
	}
	return nil
}

// LoginAccount refuses an account without forms_oauth: true.
func (Source) LoginAccount(acct config.Account) error {
	if !acct.FormsOAuth {
		return fmt.Errorf("account %s does not sign in to the Forms API with OAuth: set forms_oauth: true on it (instead of api_key or api_key_file)", acct.Name)
	}
	return nil
}

// LoginCommand is Login.
func (Source) LoginCommand(account string) string { return Login(account) }

// Secrets is the account's sign-in (TokenSecret), when it signs in. The
// legacy name is not kept: a Save removes it.
func (Source) Secrets(acct config.Account) []string {
	if !acct.FormsOAuth {
		return nil
	}
	return []string{TokenSecret(acct.Namespace())}
}

// DeleteSignIn forgets the account's sign-in, under its legacy name too.
func (Source) DeleteSignIn(ctx context.Context, store state.Store, namespace string) error {
	return Tokens{Store: store, Namespace: namespace}.Delete(ctx)
}

// StoredSignIn is the account's stored formsauth.Token, ErrNoSignIn when
// there is none; with check, tried with GET {base_url}/forms (which
// writes nothing: a read-only state may be checked).
func (Source) StoredSignIn(ctx context.Context, env source.Env, check bool) (any, error) {
	tok, err := Tokens{Store: env.Store, Namespace: env.Account.Namespace()}.Load(ctx)
	if err == nil && check {
		err = CheckToken(ctx, env.Config, env.Account, tok, env.Log)
	}
	return tok, err
}

// SaveSignIn saves the formsauth.Token a running syncd was handed.
func (Source) SaveSignIn(ctx context.Context, store state.Store, acct config.Account, token json.RawMessage) error {
	if !acct.FormsOAuth {
		return fmt.Errorf("account %s is no longer configured to sign in to the Forms API (forms_oauth)", acct.Name)
	}
	var tok formsauth.Token
	if err := json.Unmarshal(token, &tok); err != nil {
		return fmt.Errorf("read the Forms API sign-in handed over for account %s: %w", acct.Name, err)
	}
	return Tokens{Store: store, Namespace: acct.Namespace()}.Save(ctx, tok)
}

// NewLogin is the authorization-code sign-in of the account, through the
// redirect of the forms_oauth section.
func (Source) NewLogin(env source.Env) (*source.LoginFlow, error) {
	cfg, acct, log := env.Config, env.Account, env.Log
	redirect := ""
	if cfg.FormsOAuth != nil { // none: NewApp says what to add
		redirect = cfg.FormsOAuth.RedirectURI
	}
	fa, err := NewApp(cfg, redirect)
	if err != nil {
		return nil, err
	}
	return &source.LoginFlow{
		RedirectURI: fa.RedirectURI(),
		Command:     Login(acct.Name),
		What:        "token",
		Request: func() (string, string, error) {
			req, err := fa.NewAuthRequest()
			if err != nil {
				return "", "", err
			}
			return req.URL, req.State, nil
		},
		Finish: func(ctx context.Context, code string) (*source.SignedIn, error) {
			tok, err := fa.Exchange(ctx, code)
			if err != nil {
				return nil, oauth.StepFailed(oauth.StepExchange, fmt.Errorf("account %s: %w", acct.Name, err))
			}
			if err := CheckToken(ctx, cfg, acct, tok, log); err != nil {
				return nil, oauth.StepFailed(oauth.StepCheck, fmt.Errorf("account %s: the new sign-in does not work, and was not stored: %w", acct.Name, err))
			}
			return &source.SignedIn{
				Token: tok,
				Save: func(ctx context.Context, store state.Store) error {
					return Tokens{Store: store, Namespace: acct.Namespace()}.Save(ctx, tok)
				},
				Text: func(w io.Writer, where, how string) {
					fmt.Fprintf(w, "account %s: signed in to the Forms API at %s; the token is in the state (%s)%s\n", acct.Name, tok.BaseURL, where, how)
				},
			}, nil
		},
	}, nil
}

// NewApp is the Forms API's OAuth app of the forms_oauth section, waiting
// for the code on redirect (the loopback one of `auth login`).
func NewApp(cfg *config.Config, redirect string) (*formsauth.App, error) {
	f := cfg.FormsOAuth
	if f == nil {
		return nil, errNoSection
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

// CheckToken asks the Forms API whether tok works: GET {base_url}/forms.
func CheckToken(ctx context.Context, cfg *config.Config, acct config.Account, tok formsauth.Token, log *zap.Logger) error {
	c, err := NewTokenClient(cfg, acct, tok, nil, log, nil)
	if err != nil {
		return err
	}
	if _, err := c.ListForms(ctx); err != nil {
		return fmt.Errorf("check the new sign-in with GET %s/forms: %w", tok.BaseURL, err)
	}
	return nil
}
