package scheduling

// The sign-in of `syncd auth login` and the connect page to the
// scheduling API (source.Login, source.Connector): the authorization-code
// flow of the scheduling section's OAuth client, the tokens kept in the
// state (StateTokens).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

var (
	_ source.Login     = Source{}
	_ source.Connector = Source{}
)

// loginCommand is the command that signs the only account in again.
const loginCommand = "syncd auth login"

// LoginSection refuses a configuration without a scheduling section.
func (Source) LoginSection(cfg *config.Config) error {
	if cfg.Scheduling == nil {
		return errors.New("the configuration has no scheduling section: add one (see configs/syncd.example.yaml) to sync bookings")
	}
	return nil
}

// LoginAccount refuses an account without scheduling: true.
func (Source) LoginAccount(acct config.Account) error {
	if !acct.Scheduling {
		return fmt.Errorf("account %s does not sign in to the scheduling API: set scheduling: true on it", acct.Name)
	}
	return nil
}

// LoginCommand is `syncd auth login --account NAME`.
func (Source) LoginCommand(account string) string { return loginCommand + " --account " + account }

// Secrets is the account's tokens (TokenSecret), when it signs in.
func (Source) Secrets(acct config.Account) []string {
	if !acct.Scheduling {
		return nil
	}
	return []string{TokenSecret(acct.Namespace())}
}

// DeleteSignIn forgets the account's tokens.
func (Source) DeleteSignIn(ctx context.Context, store state.Store, namespace string) error {
	return StateTokens{Store: store, Namespace: namespace}.Delete(ctx)
}

// StoredSignIn is the account's stored oauth.Token; with check, refreshed
// at the token endpoint (CheckSignIn).
func (Source) StoredSignIn(ctx context.Context, env source.Env, check bool) (any, error) {
	if !check {
		return StateTokens{Store: env.Store, Namespace: env.Account.Namespace()}.Load(ctx)
	}
	return CheckSignIn(ctx, env.Config, env.Account.Namespace(), env.Store, env.Log)
}

// SaveSignIn saves the oauth.Token pair a running syncd was handed.
func (Source) SaveSignIn(ctx context.Context, store state.Store, acct config.Account, token json.RawMessage) error {
	if !acct.Scheduling {
		return fmt.Errorf("account %s is no longer configured to sign in to the scheduling API", acct.Name)
	}
	var tok oauth.Token
	if err := json.Unmarshal(token, &tok); err != nil {
		return fmt.Errorf("read the scheduling API tokens handed over for account %s: %w", acct.Name, err)
	}
	return StateTokens{Store: store, Namespace: acct.Namespace()}.Save(ctx, tok)
}

// ReplaceSignIn runs write with the account's token source held
// (source.LiveSignIn).
func (a *Account) ReplaceSignIn(ctx context.Context, write func(context.Context) error) error {
	return a.Tokens.Replace(ctx, write)
}

// NewLogin is the PKCE authorization-code sign-in of the account, through
// the loopback redirect of the scheduling section.
func (s Source) NewLogin(env source.Env) (*source.LoginFlow, error) {
	cfg, acct, log := env.Config, env.Account, env.Log
	oc, err := NewOAuthClient(cfg, log, nil)
	if err != nil {
		return nil, err
	}
	// The verifier of the last request is the exchange's: a flow is one
	// sign-in, its Request and Finish called in turn.
	var verifier string
	return &source.LoginFlow{
		RedirectURI: cfg.Scheduling.RedirectURI,
		Command:     loginCommand,
		What:        "tokens",
		Request: func() (string, string, error) {
			req, err := oc.NewAuthRequest()
			if err != nil {
				return "", "", err
			}
			verifier = req.Verifier
			return req.URL, req.State, nil
		},
		Finish: func(ctx context.Context, code string) (*source.SignedIn, error) {
			tok, err := oc.Exchange(ctx, code, verifier)
			if err != nil {
				return nil, oauth.StepFailed(oauth.StepExchange, err)
			}
			tok = s.WhoAmI(ctx, env, tok)
			return &source.SignedIn{
				Token: tok,
				Save: func(ctx context.Context, store state.Store) error {
					return StateTokens{Store: store, Namespace: acct.Namespace()}.Save(ctx, tok)
				},
				Text: func(w io.Writer, where, how string) {
					writeLogin(w, cfg.MultiAccount(), acct.Name, tok, where, how)
				},
			}, nil
		},
	}, nil
}

// writeLogin writes what `syncd auth login` says once the tokens tok are
// saved: in a configuration of several accounts (multi), under the
// account's name.
func writeLogin(w io.Writer, multi bool, account string, tok oauth.Token, where, how string) {
	if multi {
		fmt.Fprintf(w, "account %s: ", account)
	}
	fmt.Fprintf(w, "signed in as %s; the tokens are in the state (%s)%s\n", textfmt.OrDash(tok.User), where, how)
	if tok.Legacy {
		fmt.Fprintln(w, "note: a legacy client (no scopes): "+oauth.LegacyMigrationStep)
	}
}

// ConnectClient is the OAuth client of the scheduling section redirected
// to the connect page's callback.
func (Source) ConnectClient(env source.Env, redirect string) (*oauth.Client, error) {
	return NewOAuthClientAt(env.Config, redirect, env.Log, env.Observer)
}

// WhoAmI names the signed-in user from GET /v2/me. A token without
// PROFILE_READ still works for bookings, so a refusal only warns.
func (Source) WhoAmI(ctx context.Context, env source.Env, tok oauth.Token) oauth.Token {
	client, err := NewClient(env.Config, fixedToken{tok}, env.Log, nil)
	if err == nil {
		m, merr := client.Me(ctx)
		if merr == nil {
			tok.User, tok.UserID = m.Email, m.ID
			if tok.User == "" {
				tok.User = m.Username
			}
			return tok
		}
		err = merr
	}
	env.Log.Warn("could not read the signed-in user (GET /v2/me); the tokens are stored anyway", zap.Error(err))
	return tok
}

// fixedToken hands out one token (the one just obtained).
type fixedToken struct{ tok oauth.Token }

func (f fixedToken) Token(context.Context) (oauth.Token, error) { return f.tok, nil }
func (fixedToken) Invalidate(string)                            {}

// CheckSignIn asks the token endpoint whether the stored sign-in still
// works, by refreshing it: a token that merely looks valid here may have
// been revoked at the server, and only a refresh shows that of the refresh
// token. A refresh rotates the refresh token, so it must never cost the
// sign-in: the stored pair is first written back unchanged, so that a
// state that cannot be written fails before the rotation (the sign-in
// untouched), and the rotated pair's save is tried again before it is
// given up, with an error that says so. It returns the fresh token, or the
// stored one with the error that says what to do (`syncd auth login` for a
// revoked or expired sign-in).
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
	where := cfg.State.Where()
	if err := tokens.Save(ctx, stored); err != nil {
		return stored, fmt.Errorf("the state %s cannot be written (%w): syncd did not refresh the token to check the sign-in at the token endpoint, "+
			"since the rotated refresh token could not be saved and the sign-in would be lost; the sign-in is unchanged: "+
			"make the state writable (permissions, free space) and run `syncd auth status` again", where, err)
	}
	fresh, err := oc.Refresh(ctx, stored)
	if err != nil {
		return stored, err
	}
	if err := saveRotated(ctx, tokens, fresh); err != nil {
		log.Error("the scheduling API rotated the refresh token, and the new one could not be saved: the sign-in is lost",
			zap.String(logkey.State, where), zap.Error(err))
		return stored, fmt.Errorf("the scheduling API rotated the refresh token when syncd refreshed it to check the sign-in, "+
			"but the new one could not be saved in the state %s (%w): the stored one no longer works; "+
			"make the state writable (permissions, free space), then run `syncd auth login`", where, err)
	}
	return fresh, nil
}

// saveRotated saves a rotated pair, trying again a few times: the server
// has retired the stored refresh token, so this save is the sign-in's only
// way on, and a busy or briefly failing state should not end it.
func saveRotated(ctx context.Context, tokens StateTokens, fresh oauth.Token) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err = tokens.Save(ctx, fresh); err == nil {
			return nil
		}
	}
	return err
}
