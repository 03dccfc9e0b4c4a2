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
