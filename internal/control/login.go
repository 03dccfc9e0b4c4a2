package control

import (
	"context"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
)

// Login is one source's authorization-code sign-in of an account, as
// `syncd auth login` runs it: a request whose URL the person opens, and,
// with the code of the redirect, the exchange, the check and the save.
type Login struct {
	// RedirectURI is where the browser is sent back with the code.
	RedirectURI string
	// Command is the command to run again should the sign-in fail.
	Command string
	// Request is a new authorization request: the URL to open and the
	// state the redirect must carry back.
	Request func() (url, state string, err error)
	// Finish exchanges code, checks and saves the sign-in, each failure
	// marked with its step (oauth.StepFailed) for the browser's page; it
	// returns what the command prints of it.
	Finish func(ctx context.Context, code string) (text func(w io.Writer), err error)
}

// NewLogin is the sign-in to source (app.SignInScheduling or
// app.SignInForms) of acct; an error is the configuration's.
func NewLogin(cfg *config.Config, log *zap.Logger, acct config.Account, source string) (*Login, error) {
	if source == app.SignInForms {
		redirect := ""
		if cfg.FormsOAuth != nil { // none: NewFormsApp says what to add
			redirect = cfg.FormsOAuth.RedirectURI
		}
		fa, err := app.NewFormsApp(cfg, redirect)
		if err != nil {
			return nil, err
		}
		l := &Login{RedirectURI: fa.RedirectURI(), Command: app.FormsLogin(acct.Name)}
		l.Request = func() (string, string, error) {
			req, err := fa.NewAuthRequest()
			if err != nil {
				return "", "", err
			}
			return req.URL, req.State, nil
		}
		l.Finish = func(ctx context.Context, code string) (func(io.Writer), error) {
			tok, how, err := FinishFormsLogin(ctx, cfg, log, acct, fa, code)
			return func(w io.Writer) {
				fmt.Fprintf(w, "account %s: signed in to the Forms API at %s; the token is in the state (%s)%s\n", acct.Name, tok.BaseURL, app.StateWhere(cfg), how)
			}, err
		}
		return l, nil
	}
	oc, err := app.NewOAuthClient(cfg, log, nil)
	if err != nil {
		return nil, err
	}
	l := &Login{RedirectURI: cfg.Scheduling.RedirectURI, Command: "syncd auth login"}
	var verifier string
	l.Request = func() (string, string, error) {
		req, err := oc.NewAuthRequest()
		if err != nil {
			return "", "", err
		}
		verifier = req.Verifier
		return req.URL, req.State, nil
	}
	l.Finish = func(ctx context.Context, code string) (func(io.Writer), error) {
		tok, how, err := FinishSchedulingLogin(ctx, cfg, log, acct, oc, code, verifier)
		return func(w io.Writer) {
			WriteSchedulingLogin(w, cfg.MultiAccount(), acct.Name, tok, app.StateWhere(cfg), how)
		}, err
	}
	return l, nil
}
