package control

import (
	"context"
	"io"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
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

// NewLogin is the sign-in of acct to the listed source named name
// (app.SignInScheduling, app.SignInForms: a source.Login); an error is
// the configuration's. The source exchanges and checks; the save is
// SaveSignIn's, in the state or through the running syncd that holds it.
func NewLogin(cfg *config.Config, log *zap.Logger, acct config.Account, name string) (*Login, error) {
	src, err := app.LoginSource(name)
	if err != nil {
		return nil, err
	}
	flow, err := src.NewLogin(source.Env{Config: cfg, Account: acct, Log: log})
	if err != nil {
		return nil, err
	}
	l := &Login{RedirectURI: flow.RedirectURI, Command: flow.Command, Request: flow.Request}
	l.Finish = func(ctx context.Context, code string) (func(io.Writer), error) {
		in, err := flow.Finish(ctx, code)
		if err != nil {
			return nil, err
		}
		save := func(store state.Store) error { return in.Save(ctx, store) }
		how, err := SaveSignIn(ctx, cfg, acct, name, in.Token, save, flow.Command, flow.What)
		if err != nil {
			return nil, oauth.StepFailed(oauth.StepSave, err)
		}
		return func(w io.Writer) { in.Text(w, app.StateWhere(cfg), how) }, nil
	}
	return l, nil
}
