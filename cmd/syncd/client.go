package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// loadClient loads the configuration and builds the Forms API client, for
// the commands that only read the API.
func (g *globals) loadClient(ctx context.Context) (*config.Config, *zap.Logger, *forms.Client, error) {
	cfg, log, err := g.load()
	if err != nil {
		return nil, nil, nil, err
	}
	acct, err := g.account(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := formsClient(ctx, cfg, acct, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, log, client, nil
}

// formsClient is the Forms API client of a configured account, for a
// command that reads its forms (exit 2 when it has no key).
func formsClient(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger) (*forms.Client, error) {
	if !acct.HasForms() {
		return nil, withCode(exitUsage, fmt.Errorf("account %s has no Forms API key: this command reads forms", acct.Name))
	}
	client, _, err := app.ReadClient(ctx, cfg, acct, log, nil)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return client, nil
}
