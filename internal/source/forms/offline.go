package forms

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/source"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
)

var (
	_ source.ReadOnly  = Source{}
	_ source.Inspector = (*Account)(nil)
)

// OpenReadOnly opens the account's forms to read only (a dry run, the id
// checks before a pass, `syncd forms`): through its key, or the sign-in
// the state holds now, which is read once and never refreshed. nil when
// the account has no forms. The commands that read forms cannot do
// without a client: a sign-in missing or unreadable fails the opening (a
// *SignInError).
func (s Source) OpenReadOnly(ctx context.Context, env source.Env) (source.Account, error) {
	if !env.Account.HasForms() {
		return nil, nil
	}
	client, err := s.readClient(ctx, env)
	if err != nil {
		return nil, err
	}
	// The account's own log stays quiet: its streams are only planned.
	return &Account{cfg: env.Config, ac: env.Account, log: zap.NewNop(), client: client}, nil
}

// readClient is the client of the account of env: its key, or the
// sign-in env.Store holds.
func (s Source) readClient(ctx context.Context, env source.Env) (*api.Client, error) {
	ac := env.Account
	if !ac.FormsOAuth {
		return NewAccountClient(env.Config, ac, s.Limiters, env.Log, env.Observer)
	}
	if env.Store == nil {
		return nil, &SignInError{Account: ac.Name, Err: errors.New("there is no state to read the sign-in from")}
	}
	tok, err := Tokens{Store: env.Store, Namespace: ac.Namespace()}.Load(ctx)
	if unreadable := (*source.UnreadableStateError)(nil); errors.As(err, &unreadable) {
		return nil, fmt.Errorf("read the Forms API sign-in of account %s: %w", ac.Name, unreadable.Err)
	}
	if err != nil {
		return nil, &SignInError{Account: ac.Name, Err: err}
	}
	return NewTokenClient(env.Config, ac, tok, s.Limiters, env.Log, env.Observer)
}
