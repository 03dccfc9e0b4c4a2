package main

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
)

// The APIs `syncd auth --source` signs in to.
const (
	sourceScheduling = app.SignInScheduling
	sourceForms      = app.SignInForms
)

func checkSource(source string) error {
	if source != sourceScheduling && source != sourceForms {
		return withCode(exitUsage, fmt.Errorf("--source %q is not an API syncd signs in to: use scheduling (the default) or forms", source))
	}
	return nil
}

// formsLogin signs an account in to the Forms API: the authorization-code
// flow on the loopback redirect URI, the exchange, a check of the token
// with GET {base_url}/forms, and the token saved in the state.
func formsLogin(ctx context.Context, g *globals, cfg *config.Config, log *zap.Logger, noBrowser bool) error {
	acct, err := g.signInAccount(cfg, sourceForms)
	if err != nil {
		return err
	}
	login := app.FormsLogin(acct.Name)
	fa, err := app.NewFormsApp(cfg, cfg.FormsOAuth.RedirectURI)
	if err != nil {
		return withCode(exitUsage, err)
	}
	// As for the scheduling API: the state is checked now and opened
	// again only to save the token, not held while the person approves.
	if err := probeForLogin(ctx, g, cfg, acct.Namespace()); err != nil {
		return err
	}
	req, err := fa.NewAuthRequest()
	if err != nil {
		return withCode(exitFailed, err)
	}
	code, answer, err := waitForCode(ctx, g, fa.RedirectURI(), req.URL, req.State, noBrowser, login)
	if err != nil {
		return withCode(exitFailed, err)
	}
	// The browser waits for this outcome (answer), as for the scheduling
	// API's sign-in.
	tok, how, err := control.FinishFormsLogin(ctx, cfg, log, acct, fa, code)
	answer(err)
	if err != nil {
		return withCode(signInCode(err), err)
	}
	fmt.Fprintf(g.stdout, "account %s: signed in to the Forms API at %s; the token is in the state (%s)%s\n", acct.Name, tok.BaseURL, app.StateWhere(cfg), how)
	return nil
}

// formsStatus prints the Forms API sign-in of every account of list with
// forms_oauth, checked with GET {base_url}/forms; exit 1 when one is
// missing or refused.
func formsStatus(ctx context.Context, g *globals, cfg *config.Config, list []config.Account, log *zap.Logger) error {
	if cfg.FormsOAuth == nil {
		return withCode(exitUsage, errors.New("the configuration has no forms_oauth section: no account signs in to the Forms API with OAuth"))
	}
	signIns, err := control.OpenFormsSignIns(ctx, cfg, log)
	if err != nil {
		return withCode(exitState, err)
	}
	defer signIns.Close()
	if pid, ok := signIns.Daemon(); ok {
		fmt.Fprintf(g.stderr, "syncd: the state is in use by the running syncd (pid %d): it checks the sign-ins\n", pid)
	}
	bad := 0
	for _, acct := range list {
		if !acct.FormsOAuth {
			continue
		}
		tok, err := signIns.Check(ctx, acct)
		if !(control.FormsStatus{Account: acct.Name, Token: tok, Err: err}).WriteText(g.stdout) {
			bad++
		}
	}
	if bad > 0 {
		return withCode(exitFailed, errReported)
	}
	return nil
}
