package app

// The sign-ins of `syncd auth`: which account signs in where, the state
// opened to write one, and the code of the authorization's redirect. What
// goes through a running syncd is internal/control's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

// LoginWait bounds how long `auth login` waits for the person to approve.
const LoginWait = 10 * time.Minute

// OpenStoreWaiting opens the state to write the account of namespace,
// waiting up to wait while another syncd holds it (a pass that will end).
func OpenStoreWaiting(ctx context.Context, cfg *config.Config, namespace string, wait time.Duration) (state.Store, error) {
	deadline := time.Now().Add(wait)
	for {
		store, err := OpenStoreOf(ctx, cfg, namespace)
		var locked *state.LockedError
		if err == nil || !errors.As(err, &locked) || time.Now().After(deadline) {
			return store, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// The sources `syncd auth --source` signs in to.
const (
	SignInScheduling = "scheduling"
	SignInForms      = "forms"
)

// LoginSource is the listed source named name that accounts sign in to
// (source.Login): `syncd auth --source` names it.
func LoginSource(name string) (source.Login, error) {
	l, ok := ListedSource(name).(source.Login)
	if !ok {
		return nil, fmt.Errorf("%q is not a source syncd signs in to", name)
	}
	return l, nil
}

// SignInSection refuses a configuration without the section that signs
// in to the source named name (scheduling or forms_oauth): no account
// signs in there.
func SignInSection(cfg *config.Config, name string) error {
	l, err := LoginSource(name)
	if err != nil {
		return err
	}
	return l.LoginSection(cfg)
}

// SignsIn refuses an account that does not sign in to the source named
// name: it has no sign-in there to log in, out or check.
func SignsIn(acct config.Account, name string) error {
	l, err := LoginSource(name)
	if err != nil {
		return err
	}
	return l.LoginAccount(acct)
}

// PastedCode is the code of the redirected URL pasted on r (the first
// line), checked against state.
func PastedCode(r io.Reader, state string) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && strings.TrimSpace(line) == "" {
		return "", fmt.Errorf("read the redirected URL from stdin: %w", err)
	}
	return oauth.ParseRedirect(line, state)
}

// AwaitCode listens on redirectURI, calls listening once it does (to print
// the authorization URL), and returns the code of the redirect checked
// against state, waiting up to LoginWait; login is the command to run
// again.
//
// answer gives the browser, which waits on the listener, the outcome of the
// sign-in (nil: signed in; an oauth.StepError names the step that failed)
// and stops the listener: call it once the tokens are saved or the sign-in
// failed. It does nothing when err is not nil (the browser was answered
// already).
func AwaitCode(ctx context.Context, redirectURI, state, login string, listening func()) (code string, answer func(error), err error) {
	nothing := func(error) {}
	rcv, err := oauth.Listen(redirectURI)
	if err != nil {
		return "", nothing, err
	}
	listening()
	wctx, cancel := context.WithTimeout(ctx, LoginWait)
	defer cancel()
	code, err = rcv.Wait(wctx, state)
	if err != nil {
		_ = rcv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return "", nothing, fmt.Errorf("no redirect reached %s within %s: run `%s` again", redirectURI, LoginWait, login)
		}
		return "", nothing, err
	}
	return code, func(err error) {
		rcv.Finish(err)
		_ = rcv.Close()
	}, nil
}

// SchedulingSignIns are the accounts of list whose scheduling API sign-in
// `auth status` checks: those with scheduling: true, one at least. Every
// account named with --account (named) must sign in, as for login and
// logout.
func SchedulingSignIns(cfg *config.Config, list []config.Account, named bool) ([]config.Account, error) {
	if cfg.Scheduling == nil {
		return nil, errors.New("the configuration has no scheduling section: nothing signs in to the scheduling API (the Forms API sign-ins: `syncd auth status --source forms`)")
	}
	var out []config.Account
	for _, acct := range list {
		if named {
			if err := SignsIn(acct, SignInScheduling); err != nil {
				return nil, err
			}
		}
		if acct.Scheduling {
			out = append(out, acct)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no account signs in to the scheduling API: set scheduling: true on one")
	}
	return out, nil
}

// DeleteSignIn is what `auth logout` removes from the state for the
// source named name: the account's sign-in in namespace.
func DeleteSignIn(ctx context.Context, name, namespace string) func(state.Store) error {
	return func(store state.Store) error {
		l, err := LoginSource(name)
		if err != nil {
			return err
		}
		return l.DeleteSignIn(ctx, store, namespace)
	}
}

// secretNames are what the listed sources keep in the state store for
// cfg's accounts (their sign-ins): a restore of an older state keeps the
// newer values (KeepSecrets).
func secretNames(cfg *config.Config) []string {
	var out []string
	for _, a := range cfg.AccountList() {
		for _, src := range sourceList() {
			if l, ok := src.(source.Login); ok {
				out = append(out, l.Secrets(a)...)
			}
		}
	}
	return out
}

// KeepSecrets reads the sign-ins the state at cfg holds now, and returns
// what puts them back: a restore replaces the state with a backup, whose
// refresh tokens were rotated since and are spent (the next pass would fail
// with invalid_grant), so the newer ones stay. A state that does not exist
// or holds none keeps the backup's.
func KeepSecrets(ctx context.Context, cfg *config.Config) (func(ctx context.Context, store state.Store) (int, error), error) {
	kept := map[string][]byte{}
	store, err := OpenStore(ctx, cfg, true)
	if err == nil {
		for _, name := range secretNames(cfg) {
			v, gerr := store.GetSecret(ctx, name)
			if gerr != nil {
				store.Close()
				return nil, fmt.Errorf("read the sign-ins of the state before the restore: %w", gerr)
			}
			if v != nil {
				kept[name] = v
			}
		}
		store.Close()
	}
	return func(ctx context.Context, store state.Store) (int, error) {
		for name, v := range kept {
			if err := store.PutSecret(ctx, name, v); err != nil {
				return 0, fmt.Errorf("keep the newer sign-in %s: %w", name, err)
			}
		}
		return len(kept), nil
	}, nil
}

// ErrNoSignIn is matched with errors.Is by a source's error saying that
// an account which signs in has no sign-in stored (source.ErrNoSignIn).
var ErrNoSignIn = source.ErrNoSignIn

// StoredSignIn is the sign-in to the source named src that the open state
// holds for acct (source.Login's StoredSignIn: the source's token type),
// checked at the service when check is set.
func (a *App) StoredSignIn(ctx context.Context, acct config.Account, src string, check bool) (any, error) {
	l, err := LoginSource(src)
	if err != nil {
		return nil, err
	}
	return l.StoredSignIn(ctx, source.Env{Config: a.Current(), Account: acct, Store: a.Store, Log: a.Log}, check)
}
