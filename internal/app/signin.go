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

// SignInSection refuses a configuration without the section that signs
// in to source (scheduling or forms_oauth): no account signs in there.
func SignInSection(cfg *config.Config, source string) error {
	if source == SignInForms && cfg.FormsOAuth == nil {
		return errors.New("the configuration has no forms_oauth section: add one with the OAuth app's client_id and client_secret (see configs/accounts.example.yaml)")
	}
	if source == SignInScheduling && cfg.Scheduling == nil {
		return errors.New("the configuration has no scheduling section: add one (see configs/syncd.example.yaml) to sync bookings")
	}
	return nil
}

// SignsIn refuses an account that does not sign in to source: it has no
// sign-in there to log in, out or check.
func SignsIn(acct config.Account, source string) error {
	if source == SignInForms && !acct.FormsOAuth {
		return fmt.Errorf("account %s does not sign in to the Forms API with OAuth: set forms_oauth: true on it (instead of api_key or api_key_file)", acct.Name)
	}
	if source == SignInScheduling && !acct.Scheduling {
		return fmt.Errorf("account %s does not sign in to the scheduling API: set scheduling: true on it", acct.Name)
	}
	return nil
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

// DeleteSignIn is what `auth logout` removes from the state for source
// (SignInForms or SignInScheduling): the account's tokens in namespace.
func DeleteSignIn(ctx context.Context, source, namespace string) func(state.Store) error {
	return func(store state.Store) error {
		if source == SignInForms {
			return (FormsTokens{Store: store, Namespace: namespace}).Delete(ctx)
		}
		return (StateTokens{Store: store, Namespace: namespace}).Delete(ctx)
	}
}
