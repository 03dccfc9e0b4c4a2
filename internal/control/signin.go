package control

// The sign-ins of `syncd auth`: checked, saved, read and forgotten in the
// state when it opens for writing, or by the running syncd that holds it,
// through its control endpoint. A failure to reach the state is an
// *app.StateError (the commands' exit 3).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/state"
)

// saveWait bounds how long `auth login` waits for a pass that holds the
// state to finish, to save the tokens.
const saveWait = 2 * time.Minute

// InterruptedError is a wait for the state that ctx ended: nothing was
// saved.
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }

// ProbeForLogin checks, before the person approves, that the sign-in can
// be saved: the state opens for writing, or the running syncd that holds
// it answers on its control endpoint (it will store the tokens); held is
// then what holds the state. Every error is the state's.
func ProbeForLogin(ctx context.Context, cfg *config.Config, namespace string) (held *state.LockedError, err error) {
	probe, err := app.OpenStoreOf(ctx, cfg, namespace)
	if held, ok := HeldByDaemon(err); ok {
		if _, cerr := Connect(ctx, cfg, held); cerr != nil {
			return nil, cerr
		}
		return held, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, probe.Close()
}

// FinishSchedulingLogin exchanges the code of the scheduling API's redirect,
// reads who signed in and saves the tokens of acct (SaveSignIn), each
// failure marked with its step (oauth.StepFailed) for the browser's page.
func FinishSchedulingLogin(ctx context.Context, cfg *config.Config, log *zap.Logger, acct config.Account, oc *oauth.Client, code, verifier string) (tok oauth.Token, how string, err error) {
	tok, err = oc.Exchange(ctx, code, verifier)
	if err != nil {
		return tok, "", oauth.StepFailed(oauth.StepExchange, err)
	}
	tok = app.WhoAmI(ctx, cfg, log, tok)
	save := func(store state.Store) error {
		return (app.StateTokens{Store: store, Namespace: acct.Namespace()}).Save(ctx, tok)
	}
	how, err = SaveSignIn(ctx, cfg, acct, sourceScheduling, tok, save, "syncd auth login", "tokens")
	return tok, how, oauth.StepFailed(oauth.StepSave, err)
}

// FinishFormsLogin exchanges the code of the Forms API's redirect, checks the
// token with GET {base_url}/forms and saves it (SaveSignIn), each failure
// marked with its step, as FinishSchedulingLogin.
func FinishFormsLogin(ctx context.Context, cfg *config.Config, log *zap.Logger, acct config.Account, fa *formsauth.App, code string) (tok formsauth.Token, how string, err error) {
	tok, err = fa.Exchange(ctx, code)
	if err != nil {
		return tok, "", oauth.StepFailed(oauth.StepExchange, fmt.Errorf("account %s: %w", acct.Name, err))
	}
	if err := app.CheckFormsToken(ctx, cfg, acct, tok, log); err != nil {
		return tok, "", oauth.StepFailed(oauth.StepCheck, fmt.Errorf("account %s: the new sign-in does not work, and was not stored: %w", acct.Name, err))
	}
	save := func(store state.Store) error {
		return (app.FormsTokens{Store: store, Namespace: acct.Namespace()}).Save(ctx, tok)
	}
	how, err = SaveSignIn(ctx, cfg, acct, sourceForms, tok, save, app.FormsLogin(acct.Name), "token")
	return tok, how, oauth.StepFailed(oauth.StepSave, err)
}

// SaveSignIn stores the sign-in tok of acct (source: scheduling or forms;
// what: "tokens" or "token"): with save, when the state opens for writing,
// or by the running syncd that holds it, through its control endpoint.
// While a pass without a control endpoint (`syncd once`) holds the state, it
// waits up to saveWait for it to end. how is "" or says that the daemon
// stored it. The person's consent is never dropped for a state that is
// merely busy. A state that stays out of reach is an *app.StateError, a
// wait ctx ended an *InterruptedError.
func SaveSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, tok any, save func(state.Store) error, login, what string) (how string, err error) {
	deadline := time.Now().Add(saveWait)
	for {
		store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
		if err == nil {
			defer store.Close()
			return "", save(store)
		}
		held, ok := HeldByDaemon(err)
		if !ok {
			return "", &app.StateError{Err: fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, err, login)}
		}
		c, cerr := Connect(ctx, cfg, held)
		if cerr == nil {
			serr := c.SignIn(ctx, acct.Name, source, tok)
			if serr == nil {
				return fmt.Sprintf(", stored by the running syncd (pid %d), whose next pass uses the sign-in", c.PID()), nil
			}
			var refused *Refusal
			if errors.As(serr, &refused) {
				return "", fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again", what, serr, login)
			}
			cerr = serr
		}
		if time.Now().After(deadline) {
			return "", &app.StateError{Err: fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, cerr, login)}
		}
		select {
		case <-ctx.Done():
			return "", &InterruptedError{Err: ctx.Err()}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// SignInStatus is the stored sign-in, checked at the token endpoint
// (app.CheckSignIn) when the state can be opened for writing; beside a
// running syncd that holds the state, it is read only (local set).
func SignInStatus(ctx context.Context, cfg *config.Config, namespace string, log *zap.Logger) (tok oauth.Token, local bool, err error) {
	store, err := app.OpenStoreWaiting(ctx, cfg, namespace, 5*time.Second)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		ro, rerr := app.OpenStore(ctx, cfg, true)
		if held, ok := HeldByDaemon(rerr); ok {
			// A state file its daemon writes cannot be read beside it: the
			// daemon reads the sign-in (its facts, never a token).
			c, cerr := Connect(ctx, cfg, held)
			if cerr != nil {
				return tok, true, cerr
			}
			tok, err = c.SignInStatus(ctx, namespace)
			return tok, true, err
		}
		if rerr != nil {
			return tok, true, rerr
		}
		defer ro.Close()
		tok, err = (app.StateTokens{Store: ro, Namespace: namespace}).Load(ctx)
		return tok, true, err
	}
	if err != nil {
		return tok, false, err
	}
	defer store.Close()
	tok, err = app.CheckSignIn(ctx, cfg, namespace, store, log)
	return tok, false, err
}

// FormsSignIns reads and checks the Forms API sign-ins of `auth status
// --source forms`: in the state, or by the running syncd that holds it.
type FormsSignIns struct {
	cfg    *config.Config
	log    *zap.Logger
	store  state.Store
	daemon *Client
}

// OpenFormsSignIns opens the state to read the sign-ins: for writing, or,
// beside a running syncd, read only or through that syncd. Every error is
// the state's.
func OpenFormsSignIns(ctx context.Context, cfg *config.Config, log *zap.Logger) (*FormsSignIns, error) {
	store, err := app.OpenStoreWaiting(ctx, cfg, "", 5*time.Second)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		// A running syncd holds the state: its sign-ins can still be read.
		store, err = app.OpenStore(ctx, cfg, true)
	}
	// A state file the daemon writes cannot be read beside it: the daemon
	// reads and checks the sign-ins.
	s := &FormsSignIns{cfg: cfg, log: log, store: store}
	if held, ok := HeldByDaemon(err); ok {
		s.store = nil // OpenStore's failed open may be a nil store in a non-nil interface
		s.daemon, err = Connect(ctx, cfg, held)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Daemon is the pid of the running syncd that reads the sign-ins; ok is
// false when the state is read here.
func (s *FormsSignIns) Daemon() (pid int, ok bool) {
	if s.daemon == nil {
		return 0, false
	}
	return s.daemon.PID(), true
}

// Check is the sign-in of acct and whether it works: app.ErrNoFormsToken
// when there is none, the Forms API's refusal when it refuses it.
func (s *FormsSignIns) Check(ctx context.Context, acct config.Account) (formsauth.Token, error) {
	if s.daemon != nil {
		return s.daemon.FormsSignInStatus(ctx, acct.Name)
	}
	tok, err := (app.FormsTokens{Store: s.store, Namespace: acct.Namespace()}).Load(ctx)
	if err == nil {
		err = app.CheckFormsToken(ctx, s.cfg, acct, tok, s.log)
	}
	return tok, err
}

// Close closes the state, when it was opened here.
func (s *FormsSignIns) Close() error {
	if s.store == nil {
		return nil
	}
	return s.store.Close()
}

// ForgetSignIn deletes the sign-in of acct (source: scheduling or forms)
// with del when the state opens for writing, or through the running syncd
// that holds it. how is "" or says the daemon did it. A state out of reach
// is an *app.StateError.
func ForgetSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, del func(state.Store) error) (how string, err error) {
	store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
	if held, ok := HeldByDaemon(err); ok {
		c, cerr := Connect(ctx, cfg, held)
		if cerr != nil {
			return "", &app.StateError{Err: cerr}
		}
		if err := c.SignOut(ctx, acct.Name, source); err != nil {
			return "", err
		}
		return fmt.Sprintf(" (by the running syncd, pid %d)", c.PID()), nil
	}
	if err != nil {
		return "", &app.StateError{Err: err}
	}
	defer store.Close()
	return "", del(store)
}
