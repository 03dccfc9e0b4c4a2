package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
)

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Sign in to the scheduling API (OAuth 2.0) whose bookings syncd exports, or to the Forms API (--source forms)",
	}
	var source string
	cmd.PersistentFlags().StringVar(&source, "source", sourceScheduling, "the API to sign in to: scheduling, or forms (the accounts with forms_oauth: true)")
	var noBrowser bool
	login := &cobra.Command{
		Use:     "login",
		Short:   "Sign in: open the printed URL, approve, and syncd stores the tokens in its state",
		Long:    help("auth-login.long"),
		Example: help("auth-login.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkSource(source); err != nil {
				return err
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			acct, err := g.signInAccount(cfg, source)
			if err != nil {
				return err
			}
			l, err := control.NewLogin(cfg, log, acct, source)
			if err != nil {
				return withCode(exitUsage, err)
			}
			// The state is not held while the person approves (minutes, at
			// times): a pass may run meanwhile. It is checked now, so that a
			// state that cannot take the sign-in fails before the approval,
			// and opened again only to save it.
			if err := probeForLogin(ctx, g, cfg, acct.Namespace()); err != nil {
				return err
			}
			url, state, err := l.Request()
			if err != nil {
				return withCode(exitFailed, err)
			}
			code, answer, err := waitForCode(ctx, g, l.RedirectURI, url, state, noBrowser, l.Command)
			if err != nil {
				return withCode(exitFailed, err)
			}
			// The browser waits for this outcome (answer): its page says
			// signed in only once the sign-in is saved.
			text, err := l.Finish(ctx, code)
			answer(err)
			if err != nil {
				return withCode(signInCode(err), err)
			}
			text(g.stdout)
			return nil
		},
	}
	login.Flags().BoolVar(&noBrowser, "no-browser", false, "read the URL the browser was redirected to from stdin instead of listening for it")
	status := &cobra.Command{
		Use:     "status",
		Short:   "Who syncd is signed in as: user, scopes, expiry, legacy or not (never a token); beside a running syncd, read through it",
		Example: help("auth-status.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkSource(source); err != nil {
				return err
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			list, err := app.SelectAccounts(cfg, g.accounts)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if source == sourceForms {
				return formsStatus(ctx, g, cfg, list, log)
			}
			// Every account named with --account must sign in, as for login
			// and logout; checked before anything is printed.
			list, err = app.SchedulingSignIns(cfg, list, len(g.accounts) > 0)
			if err != nil {
				return withCode(exitUsage, err)
			}
			bad := 0
			for _, acct := range list {
				tok, local, err := control.SignInStatus(ctx, cfg, acct.Namespace(), log)
				st := control.SchedulingStatus{Multi: cfg.MultiAccount(), Account: acct.Name, Token: tok, Local: local, Err: err}
				if !st.WriteText(g.stdout, time.Now()) {
					bad++
				}
			}
			if bad > 0 {
				return withCode(exitFailed, errReported)
			}
			return nil
		},
	}
	var yes bool
	logout := &cobra.Command{
		Use:     "logout",
		Short:   "Forget the scheduling API's tokens (bookings stop syncing until the next login)",
		Example: help("auth-logout.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkSource(source); err != nil {
				return err
			}
			return logout(ctx, g, source, yes)
		},
	}
	logout.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(login, status, logout)
	return cmd
}

// logout forgets the sign-in of an account to source: the scheduling API's
// tokens, or an account's Forms API sign-in.
func logout(ctx context.Context, g *globals, source string, yes bool) error {
	ask := "Forget the scheduling API's tokens? Bookings stop syncing until `syncd auth login`."
	if source == sourceForms {
		ask = "Forget the account's Forms API sign-in? Its forms stop syncing until `syncd auth login --source forms`."
	}
	if !yes {
		if err := confirm(g, ask, "logout"); err != nil {
			return err
		}
	}
	cfg, _, err := g.load()
	if err != nil {
		return err
	}
	acct, err := g.signInAccount(cfg, source)
	if err != nil {
		return err
	}
	how, err := control.ForgetSignIn(ctx, cfg, acct, source, app.DeleteSignIn(ctx, source, acct.Namespace()))
	if err != nil {
		return withCode(signInCode(err), err)
	}
	if source == sourceForms {
		fmt.Fprintf(g.stdout, "account %s: signed out of the Forms API: the token is gone from the state%s (the service still honours it until the workspace invalidates it)\n", acct.Name, how)
		return nil
	}
	fmt.Fprintf(g.stdout, "signed out: the tokens are gone from the state%s\n", how)
	return nil
}

// probeForLogin checks, before the person approves, that the sign-in can
// be saved (control.ProbeForLogin), and says when the running syncd will
// store it.
func probeForLogin(ctx context.Context, g *globals, cfg *config.Config, namespace string) error {
	held, err := control.ProbeForLogin(ctx, cfg, namespace)
	if err != nil {
		return withCode(exitState, err)
	}
	if held != nil {
		fmt.Fprintf(g.stderr, "syncd: the state is in use by the running syncd (%s): it will store the sign-in\n", held.Holder)
	}
	return nil
}

// signInCode is the exit code of a sign-in that failed to be saved or
// forgotten: 3 when the state was out of reach, 130 when the wait for it
// was interrupted, 1 otherwise.
func signInCode(err error) int {
	var se *app.StateError
	var ie *control.InterruptedError
	switch {
	case errors.As(err, &ie):
		return exitInterrupted
	case errors.As(err, &se):
		return exitState
	}
	return exitFailed
}

// waitForCode prints the authorization URL alone on a line and returns the
// code of the redirect to redirectURI, checked against state: from the
// loopback listener (app.AwaitCode), or pasted on stdin. login is the
// command to run again; answer is AwaitCode's.
func waitForCode(ctx context.Context, g *globals, redirectURI, authURL, state string, noBrowser bool, login string) (code string, answer func(error), err error) {
	if noBrowser {
		fmt.Fprintln(g.stderr, "Open this URL in a browser, approve, then paste the address the browser ends on (it may fail to load) here:")
		fmt.Fprintln(g.stdout, authURL)
		code, err := app.PastedCode(os.Stdin, state)
		return code, func(error) {}, err
	}
	return app.AwaitCode(ctx, redirectURI, state, login, func() {
		fmt.Fprintf(g.stderr, "Open this URL in a browser and approve; syncd waits on %s (or use --no-browser):\n", redirectURI)
		fmt.Fprintln(g.stdout, authURL)
	})
}

// signInAccount is the account `auth login` and `auth logout` work on:
// --account, or the only account; it must sign in to source.
func (g *globals) signInAccount(cfg *config.Config, source string) (config.Account, error) {
	if err := app.SignInSection(cfg, source); err != nil {
		return config.Account{}, withCode(exitUsage, err)
	}
	acct, err := g.account(cfg)
	if err != nil {
		return acct, err
	}
	return acct, withCode(exitUsage, app.SignsIn(acct, source))
}
