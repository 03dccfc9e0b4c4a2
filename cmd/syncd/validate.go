package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/suggest"
)

// What validate allows itself: its API checks share one budget of
// apiBudget, each request may take requestTimeout, and is tried at most
// requestAttempts times; the sink and state checks have checkBudget each.
// Together they stay under the 30 s an operator waits for an answer.
const (
	apiBudget       = 20 * time.Second
	requestTimeout  = 8 * time.Second
	requestAttempts = 2
	checkBudget     = 8 * time.Second
)

func newValidateCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the config, the API key, the forms, the output (a probe write) and the state store",
		Long: "Check everything a sync needs, each on one line (ok, WARN or FAIL), within about 30 s:\n" +
			"the config; the API key and base_url (one answer within 20 s); every configured form;\n" +
			"that the output can be written (a hidden probe file or object is written and deleted;\n" +
			"for BigQuery a dry-run query job checks the dataset and the job permission); that\n" +
			"sync.spool_dir (or the temporary folder) takes a scratch folder; and the\n" +
			"state (beside a running `syncd run`, through its /status). Exit 0 when all is ok, 1 when\n" +
			"a check failed, 2 when the config is invalid.",
		Example: "  syncd validate\n  syncd validate --config /etc/syncd/syncd.yaml\n  syncd validate -o json | jq '.[] | select(.status != \"ok\")'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if err := checkFormat(format); err != nil {
				return err
			}
			var out io.Writer = g.stdout
			if format == formatJSON {
				// Each check's line is collected, and printed as JSON at the end.
				c := &checkLines{}
				out = c
				defer func() {
					var ee *exitError
					if err == nil || errors.As(err, &ee) && ee.code == exitFailed {
						if perr := printJSON(g.stdout, c.list()); perr != nil {
							err = perr
						}
					}
				}()
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			fmt.Fprintln(out, "ok   config")
			for _, w := range cfg.QuotaWarnings(time.Now()) {
				fmt.Fprintf(out, "WARN quota: %s\n", w)
			}
			for _, w := range cfg.PausedForms() {
				fmt.Fprintf(out, "WARN config: %s\n", w)
			}
			bad := 0
			accounts, err := app.SelectAccounts(cfg, g.accounts)
			if err != nil {
				return withCode(exitUsage, err)
			}
			// A short per-request timeout and few attempts: an API that
			// accepts connections and never answers is reported in seconds.
			vcfg := *cfg
			vcfg.Source.Timeout = config.Duration(min(cfg.Source.Timeout.D(), requestTimeout))
			vcfg.Source.MaxAttempts = min(cfg.Source.MaxAttempts, requestAttempts)
			apiCtx, cancel := context.WithTimeout(ctx, apiBudget)
			defer cancel()
			for _, acct := range accounts {
				if !acct.HasForms() {
					continue
				}
				who := ""
				if cfg.MultiAccount() {
					who = " of account " + acct.Name
				}
				client, base, err := app.ReadClient(apiCtx, &vcfg, acct, log, nil)
				if err != nil {
					fmt.Fprintf(out, "FAIL api%s: %v\n", who, err)
					bad++
					continue
				}
				acct.BaseURL = base // a forms_oauth sign-in's own
				list, err := client.ListForms(apiCtx)
				if err != nil {
					fmt.Fprintf(out, "FAIL api%s: %s\n", who, apiFailure(acct.BaseURL, err))
					bad++
					continue
				}
				fmt.Fprintf(out, "ok   api key%s: %s visible at %s\n", who, plural(int64(len(list)), "form"), acct.BaseURL)
				known := make([]string, 0, len(list))
				for _, f := range list {
					known = append(known, f.FormID)
				}
				for _, f := range acct.Forms {
					if _, err := client.GetForm(apiCtx, f.ID); err != nil {
						if p := suggest.Phrase(f.ID, known); app.IsSourceError(err, app.SourceNotFound) && p != "" {
							fmt.Fprintf(out, "FAIL form %s%s: form %s does not exist in the account (%s): fix its id in forms[]\n", f.ID, who, f.ID, p)
							bad++
							continue
						}
						fmt.Fprintf(out, "FAIL form %s%s: %s\n", f.ID, who, apiFailure(acct.BaseURL, err))
						bad++
						continue
					}
					fmt.Fprintf(out, "ok   form %s%s\n", f.ID, who)
				}
			}
			sinkCtx, cancelSink := context.WithTimeout(ctx, checkBudget)
			defer cancelSink()
			if msg, warn, err := app.ProbeOutput(sinkCtx, cfg, log); err != nil {
				fmt.Fprintf(out, "FAIL sink: %v\n", err)
				bad++
			} else {
				if warn != "" {
					fmt.Fprintf(out, "WARN sink: %s\n", warn)
				}
				fmt.Fprintf(out, "ok   sink %s\n", msg)
			}
			if dir, err := spool.CheckDir(cfg.Sync.SpoolDir); err != nil {
				fmt.Fprintf(out, "FAIL spool: %v\n", err)
				bad++
			} else {
				fmt.Fprintf(out, "ok   spool %s (a scratch folder was made and removed)\n", dir)
			}
			stateCtx, cancelState := context.WithTimeout(ctx, checkBudget)
			defer cancelState()
			if v, err := readState(stateCtx, cfg, ""); err != nil {
				fmt.Fprintf(out, "FAIL state: %v\n", err)
				bad++
			} else {
				damaged := 0
				for _, f := range v.Forms {
					if f.Damaged != "" {
						fmt.Fprintf(out, "FAIL state: %s\n", f.Damaged)
						damaged++
					}
				}
				if damaged > 0 {
					bad++
				} else if v.Source == "daemon" {
					fmt.Fprintf(out, "ok   state %s (in use by the running syncd; read through its /status)\n", v.State)
				} else {
					fmt.Fprintf(out, "ok   state %s\n", v.State)
				}
			}
			schedCtx, cancelSched := context.WithTimeout(ctx, checkBudget)
			defer cancelSched()
			for _, acct := range accounts {
				if !acct.Scheduling {
					continue
				}
				who := ""
				if cfg.MultiAccount() {
					who = " of account " + acct.Name
				}
				if err := checkScheduling(schedCtx, cfg, acct, who, log, out); err != nil {
					fmt.Fprintf(out, "FAIL scheduling%s: %v\n", who, err)
					bad++
				}
			}
			// The other listed sources that can be tried without syncing.
			for _, acct := range accounts {
				who := ""
				if cfg.MultiAccount() {
					who = " of account " + acct.Name
				}
				for _, p := range app.ProbeSources(schedCtx, cfg, acct, log) {
					if p.Err != nil {
						fmt.Fprintf(out, "FAIL %s%s: %v\n", p.Source, who, p.Err)
						bad++
						continue
					}
					fmt.Fprintf(out, "ok   %s%s\n", p.Source, who)
				}
			}
			if bad > 0 {
				return withCode(exitFailed, errReported)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// checkJSON is one check of `syncd validate -o json`.
type checkJSON struct {
	Status  string `json:"status"` // ok, warn, fail
	Check   string `json:"check"`  // what was checked: config, api key, form ID, sink, spool, state, ...
	Message string `json:"message"`
}

// checkLines collects the lines validate writes ("ok   X", "WARN X: ...",
// "FAIL X: ...") as checks.
type checkLines struct {
	buf    strings.Builder
	checks []checkJSON
}

func (c *checkLines) Write(b []byte) (int, error) {
	c.buf.Write(b)
	for {
		s := c.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return len(b), nil
		}
		c.add(s[:i])
		c.buf.Reset()
		c.buf.WriteString(s[i+1:])
	}
}

func (c *checkLines) add(line string) {
	status, text := "ok", line
	for prefix, st := range map[string]string{"ok   ": "ok", "WARN ": "warn", "FAIL ": "fail"} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			status, text = st, rest
		}
	}
	check, msg, ok := strings.Cut(text, ": ")
	if !ok {
		check, msg = text, ""
	}
	c.checks = append(c.checks, checkJSON{Status: status, Check: check, Message: msg})
}

func (c *checkLines) list() []checkJSON {
	if rest := strings.TrimSpace(c.buf.String()); rest != "" {
		c.add(rest)
		c.buf.Reset()
	}
	if c.checks == nil {
		return []checkJSON{}
	}
	return c.checks
}

// checkScheduling says who syncd is signed in to the scheduling API as,
// and whether the client is a legacy one (with the migration's first step);
// it needs no request. Not signed in is an error naming auth login.
func checkScheduling(ctx context.Context, cfg *config.Config, acct config.Account, who string, log *zap.Logger, out io.Writer) error {
	tok, local, err := signInStatus(ctx, cfg, acct.Namespace(), log)
	if errors.Is(err, oauth.ErrNoToken) {
		if cfg.MultiAccount() {
			return fmt.Errorf("not signed in: run `syncd auth login --account %s`", acct.Name)
		}
		return errors.New("not signed in: run `syncd auth login`")
	}
	if err != nil {
		return fmt.Errorf("the sign-in of %s does not work: %w", orDash(tok.User), err)
	}
	scopes := strings.Join(tok.Scopes, " ")
	if tok.Legacy || len(tok.Scopes) == 0 {
		scopes = "none (a legacy client: " + oauth.LegacyMigrationStep + ")"
	}
	how := "the token endpoint accepted it"
	if local {
		how = "checked in the state only: a running syncd holds it"
	}
	fmt.Fprintf(out, "ok   scheduling%s: signed in as %s, scopes %s (%s)\n", who, orDash(tok.User), scopes, how)
	return nil
}

// apiFailure words a failed API check: an API that never answered is
// named as such, with the time waited.
func apiFailure(baseURL string, err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "no answer within") {
		return fmt.Sprintf("no answer from %s within %s: the server accepts connections but does not answer; check source.base_url, a proxy or firewall in between, and the service's status (%v)",
			baseURL, apiBudget, err)
	}
	if app.IsSourceError(err, app.SourceUnavailable) || app.IsSourceError(err, app.SourceRateLimited) {
		return fmt.Sprintf("%s did not answer usably: %v", baseURL, err)
	}
	return err.Error()
}
