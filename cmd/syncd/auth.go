package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/state"
)

// loginWait bounds how long `auth login` waits for the person to approve.
const loginWait = 10 * time.Minute

// saveWait bounds how long `auth login` waits for a pass that holds the
// state to finish, to save the tokens.
const saveWait = 2 * time.Minute

// openStoreWaiting opens the state to write the account of namespace,
// waiting up to wait while another syncd holds it (a pass that will end).
func openStoreWaiting(ctx context.Context, cfg *config.Config, namespace string, wait time.Duration) (state.Store, error) {
	deadline := time.Now().Add(wait)
	for {
		store, err := app.OpenStoreOf(ctx, cfg, namespace)
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

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Sign in to the scheduling API (OAuth 2.0) whose bookings syncd exports, or to the Forms API (--source forms)",
	}
	var source string
	cmd.PersistentFlags().StringVar(&source, "source", sourceScheduling, "the API to sign in to: scheduling, or forms (the accounts with forms_oauth: true)")
	var noBrowser bool
	login := &cobra.Command{
		Use:   "login",
		Short: "Sign in: open the printed URL, approve, and syncd stores the tokens in its state",
		Long: "Prints the authorization URL alone on a line of stdout and waits on scheduling.redirect_uri\n" +
			"for the redirect (or, with --no-browser, for the redirected URL pasted on stdin), exchanges\n" +
			"the code, checks the token with GET /v2/me and stores the tokens in the state store (never\n" +
			"in the config or the logs). syncd then refreshes them by itself.\n\n" +
			"With --source forms, signs an account with forms_oauth: true in to the Forms API with the\n" +
			"forms_oauth app instead: it waits on forms_oauth.redirect_uri, checks the token with\n" +
			"GET {base_url}/forms and stores it with its base_url (these tokens do not expire).\n\n" +
			"Beside a running `syncd run` that holds the state, the daemon stores the tokens (through\n" +
			"its control endpoint) and its next pass uses them; beside a `syncd once`, the login waits\n" +
			"up to 2 minutes for the pass to end to save them.",
		Example: "  syncd auth login\n  syncd auth login --no-browser   # on a headless machine: paste the URL the browser ends on\n" +
			"  syncd auth login --account acme --source forms",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkSource(source); err != nil {
				return err
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			if source == sourceForms {
				return formsLogin(ctx, g, cfg, log, noBrowser)
			}
			acct, err := g.schedulingAccount(cfg)
			if err != nil {
				return err
			}
			oc, err := app.NewOAuthClient(cfg, log, nil)
			if err != nil {
				return withCode(exitUsage, err)
			}
			// The state is not held while the person approves (minutes, at
			// times): a pass may run meanwhile. It is checked now, so that a
			// state that cannot take the tokens fails before the approval,
			// and opened again only to save them.
			if err := probeForLogin(ctx, g, cfg, acct.Namespace()); err != nil {
				return err
			}
			req, err := oc.NewAuthRequest()
			if err != nil {
				return withCode(exitFailed, err)
			}
			code, answer, err := waitForCode(ctx, g, cfg.Scheduling.RedirectURI, req.URL, req.State, noBrowser, "syncd auth login")
			if err != nil {
				return withCode(exitFailed, err)
			}
			// The browser waits for this outcome (answer): its page says
			// signed in only once the tokens are saved.
			tok, how, err := func() (oauth.Token, string, error) {
				tok, err := oc.Exchange(ctx, code, req.Verifier)
				if err != nil {
					return tok, "", oauth.StepFailed(oauth.StepExchange, withCode(exitFailed, err))
				}
				tok = app.WhoAmI(ctx, cfg, log, tok)
				save := func(store state.Store) error {
					return (app.StateTokens{Store: store, Namespace: acct.Namespace()}).Save(ctx, tok)
				}
				how, err := saveSignIn(ctx, cfg, acct, sourceScheduling, tok, save, "syncd auth login", "tokens")
				return tok, how, oauth.StepFailed(oauth.StepSave, err)
			}()
			answer(err)
			if err != nil {
				return err
			}
			if cfg.MultiAccount() {
				fmt.Fprintf(g.stdout, "account %s: ", acct.Name)
			}
			fmt.Fprintf(g.stdout, "signed in as %s; the tokens are in the state (%s)%s\n", orDash(tok.User), app.StateWhere(cfg), how)
			if tok.Legacy {
				fmt.Fprintln(g.stdout, "note: a legacy client (no scopes): "+oauth.LegacyMigrationStep)
			}
			return nil
		},
	}
	login.Flags().BoolVar(&noBrowser, "no-browser", false, "read the URL the browser was redirected to from stdin instead of listening for it")
	status := &cobra.Command{
		Use:     "status",
		Short:   "Who syncd is signed in as: user, scopes, expiry, legacy or not (never a token); beside a running syncd, read through it",
		Example: "  syncd auth status\n  syncd auth status --source forms",
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
			if cfg.Scheduling == nil {
				return withCode(exitUsage, errors.New("the configuration has no scheduling section: nothing signs in to the scheduling API (the Forms API sign-ins: `syncd auth status --source forms`)"))
			}
			// Every account named with --account must sign in, as for login
			// and logout; checked before anything is printed.
			if len(g.accounts) > 0 {
				for _, acct := range list {
					if err := signsInToScheduling(acct); err != nil {
						return err
					}
				}
			}
			if !slices.ContainsFunc(list, func(a config.Account) bool { return a.Scheduling }) {
				return withCode(exitUsage, errors.New("no account signs in to the scheduling API: set scheduling: true on one"))
			}
			bad := 0
			for _, acct := range list {
				if !acct.Scheduling {
					continue
				}
				login := "syncd auth login"
				if cfg.MultiAccount() {
					fmt.Fprintf(g.stdout, "account %s:", acct.Name)
					login += " --account " + acct.Name
				}
				tok, local, err := signInStatus(ctx, cfg, acct.Namespace(), log)
				var lr *oauth.LoginRequiredError
				sep := "" // after "account NAME:", a space before a one-line answer
				if cfg.MultiAccount() {
					sep = " "
				}
				switch {
				case errors.Is(err, oauth.ErrNoToken):
					fmt.Fprintf(g.stdout, "%snot signed in: run `%s`\n", sep, login)
					bad++
				case errors.As(err, &lr):
					fmt.Fprintf(g.stdout, "%ssigned in as %s, but the token endpoint refused the sign-in (%s): run `%s`\n", sep, orDash(tok.User), lr.Reason, login)
					bad++
				case err != nil:
					fmt.Fprintf(g.stdout, "%scould not check the sign-in: %v\n", sep, err)
					bad++
				default:
					desc := tok.Summary().Describe(time.Now())
					if cfg.MultiAccount() {
						// The description's lines, under the account's.
						fmt.Fprintln(g.stdout)
						desc = "  " + strings.ReplaceAll(strings.TrimSuffix(desc, "\n"), "\n", "\n  ") + "\n"
					}
					fmt.Fprint(g.stdout, desc)
					if local {
						fmt.Fprintln(g.stdout, "(checked in the state only: a running syncd holds it, and uses the sign-in itself)")
					}
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
		Example: "  syncd auth logout --yes\n  syncd auth logout --account acme --source forms --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkSource(source); err != nil {
				return err
			}
			if source == sourceForms {
				return formsLogout(ctx, g, yes)
			}
			if !yes {
				if err := confirm(g, "Forget the scheduling API's tokens? Bookings stop syncing until `syncd auth login`.", "logout"); err != nil {
					return err
				}
			}
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			acct, err := g.schedulingAccount(cfg)
			if err != nil {
				return err
			}
			how, err := forgetSignIn(ctx, cfg, acct, sourceScheduling, func(store state.Store) error {
				return (app.StateTokens{Store: store, Namespace: acct.Namespace()}).Delete(ctx)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "signed out: the tokens are gone from the state%s\n", how)
			return nil
		},
	}
	logout.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(login, status, logout)
	return cmd
}

// probeForLogin checks, before the person approves, that the sign-in can
// be saved: the state opens for writing, or the running syncd that holds
// it answers on its control endpoint (it will store the tokens).
func probeForLogin(ctx context.Context, g *globals, cfg *config.Config, namespace string) error {
	probe, err := app.OpenStoreOf(ctx, cfg, namespace)
	if held, ok := control.HeldByDaemon(err); ok {
		if _, cerr := control.Connect(ctx, cfg, held); cerr != nil {
			return withCode(exitState, cerr)
		}
		fmt.Fprintf(g.stderr, "syncd: the state is in use by the running syncd (%s): it will store the sign-in\n", held.Holder)
		return nil
	}
	if err != nil {
		return withCode(exitState, err)
	}
	if err := probe.Close(); err != nil {
		return withCode(exitState, err)
	}
	return nil
}

// saveSignIn stores the sign-in tok of acct (source: scheduling or forms;
// what: "tokens" or "token"): with save, when the state opens for writing,
// or by the running syncd that holds it, through its control endpoint.
// While a pass without a control endpoint (`syncd once`) holds the state, it
// waits up to saveWait for it to end. how is "" or says that the daemon
// stored it. The person's consent is never dropped for a state that is
// merely busy.
func saveSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, tok any, save func(state.Store) error, login, what string) (how string, err error) {
	deadline := time.Now().Add(saveWait)
	for {
		store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
		if err == nil {
			defer store.Close()
			if err := save(store); err != nil {
				return "", withCode(exitFailed, err)
			}
			return "", nil
		}
		held, ok := control.HeldByDaemon(err)
		if !ok {
			return "", withCode(exitState, fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, err, login))
		}
		c, cerr := control.Connect(ctx, cfg, held)
		if cerr == nil {
			serr := c.SignIn(ctx, acct.Name, source, tok)
			if serr == nil {
				return fmt.Sprintf(", stored by the running syncd (pid %d), whose next pass uses the sign-in", c.PID()), nil
			}
			var refused *control.Refusal
			if errors.As(serr, &refused) {
				return "", withCode(exitFailed, fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again", what, serr, login))
			}
			cerr = serr
		}
		if time.Now().After(deadline) {
			return "", withCode(exitState, fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, cerr, login))
		}
		select {
		case <-ctx.Done():
			return "", withCode(exitInterrupted, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitForCode prints the authorization URL alone on a line and returns the
// code of the redirect to redirectURI, checked against state: from the
// loopback listener, or pasted on stdin. login is the command to run again.
//
// answer gives the browser, which waits on the listener, the outcome of the
// sign-in (nil: signed in; an oauth.StepError names the step that failed)
// and stops the listener: call it once the tokens are saved or the sign-in
// failed. It does nothing with --no-browser, or when err is not nil (the
// browser was answered already).
func waitForCode(ctx context.Context, g *globals, redirectURI, authURL, state string, noBrowser bool, login string) (code string, answer func(error), err error) {
	nothing := func(error) {}
	if noBrowser {
		fmt.Fprintln(g.stderr, "Open this URL in a browser, approve, then paste the address the browser ends on (it may fail to load) here:")
		fmt.Fprintln(g.stdout, authURL)
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && strings.TrimSpace(line) == "" {
			return "", nothing, fmt.Errorf("read the redirected URL from stdin: %w", err)
		}
		code, err := oauth.ParseRedirect(line, state)
		return code, nothing, err
	}
	rcv, err := oauth.Listen(redirectURI)
	if err != nil {
		return "", nothing, err
	}
	fmt.Fprintf(g.stderr, "Open this URL in a browser and approve; syncd waits on %s (or use --no-browser):\n", redirectURI)
	fmt.Fprintln(g.stdout, authURL)
	wctx, cancel := context.WithTimeout(ctx, loginWait)
	defer cancel()
	code, err = rcv.Wait(wctx, state)
	if err != nil {
		_ = rcv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return "", nothing, fmt.Errorf("no redirect reached %s within %s: run `%s` again", redirectURI, loginWait, login)
		}
		return "", nothing, err
	}
	return code, func(err error) {
		rcv.Finish(err)
		_ = rcv.Close()
	}, nil
}

// signInStatus is the stored sign-in, checked at the token endpoint
// (app.CheckSignIn) when the state can be opened for writing; beside a
// running syncd that holds the state, it is read only (local set).
func signInStatus(ctx context.Context, cfg *config.Config, namespace string, log *zap.Logger) (tok oauth.Token, local bool, err error) {
	store, err := openStoreWaiting(ctx, cfg, namespace, 5*time.Second)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		ro, rerr := app.OpenStore(ctx, cfg, true)
		if held, ok := control.HeldByDaemon(rerr); ok {
			// A state file its daemon writes cannot be read beside it: the
			// daemon reads the sign-in (its facts, never a token).
			c, cerr := control.Connect(ctx, cfg, held)
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

// schedulingAccount is the account `auth login` and `auth logout` work on:
// --account, or the only account; it must sign in to the scheduling API.
func (g *globals) schedulingAccount(cfg *config.Config) (config.Account, error) {
	if cfg.Scheduling == nil {
		return config.Account{}, withCode(exitUsage, errors.New("the configuration has no scheduling section: add one (see configs/syncd.example.yaml) to sync bookings"))
	}
	acct, err := g.account(cfg)
	if err != nil {
		return acct, err
	}
	if err := signsInToScheduling(acct); err != nil {
		return acct, err
	}
	return acct, nil
}

// signsInToScheduling refuses (exitUsage) an account without scheduling:
// true: it has no sign-in to the scheduling API to log in, out or check.
func signsInToScheduling(acct config.Account) error {
	if !acct.Scheduling {
		return withCode(exitUsage, fmt.Errorf("account %s does not sign in to the scheduling API: set scheduling: true on it", acct.Name))
	}
	return nil
}
