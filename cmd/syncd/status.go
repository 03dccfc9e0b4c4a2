package main

import (
	"context"
	"errors"

	"github.com/syncd-dev/syncd/internal/control"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/status"
)

// The view of the state that `state show -o json` prints and a daemon
// serves at /status is internal/status's: these are its names here.
type (
	stateView = status.View
	formView  = status.Form
)

// readAccountsView checks the output format and the --account names, then
// reads the state's view (query asks a running daemon's /status for more):
// the start of the commands that list something per account.
func (g *globals) readAccountsView(ctx context.Context, format, query string) (stateView, error) {
	if err := checkFormat(format); err != nil {
		return stateView{}, err
	}
	cfg, _, err := g.load()
	if err != nil {
		return stateView{}, err
	}
	if _, err := app.SelectAccounts(cfg, g.accounts); err != nil {
		return stateView{}, withCode(exitUsage, err)
	}
	return readState(ctx, cfg, query)
}

// readState is the state view (control.ReadState), with its exit code:
// 3 when the state could not be opened nor its daemon asked, 1 when it
// could not be read.
func readState(ctx context.Context, cfg *config.Config, query string) (stateView, error) {
	v, err := control.ReadState(ctx, cfg, query)
	var se *app.StateError
	if errors.As(err, &se) {
		return stateView{}, withCode(exitState, err)
	}
	if err != nil {
		return stateView{}, withCode(exitFailed, err)
	}
	return v, nil
}
