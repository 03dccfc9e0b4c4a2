package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/textfmt"
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

// The outcomes of a Check.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// Check is one check of `syncd validate`: its outcome, and its text as
// the line says it ("config", "quota: ...", "form F: ...").
type Check struct {
	Status string // CheckOK, CheckWarn or CheckFail
	Text   string
}

// Line is the check as validate prints it: "ok   X", "WARN X: ...",
// "FAIL X: ...".
func (c Check) Line() string {
	switch c.Status {
	case CheckWarn:
		return "WARN " + c.Text
	case CheckFail:
		return "FAIL " + c.Text
	}
	return "ok   " + c.Text
}

// Validation is what `syncd validate` checks beside the configuration
// itself, which the command has loaded.
type Validation struct {
	Config *config.Config
	// Accounts are the names --account gives; none: every account.
	Accounts []string
	Log      *zap.Logger
	// State reads the state's view: directly, or from a running syncd's
	// /status.
	State func(ctx context.Context) (status.View, error)
	// SignIn reads an account's sign-in to the scheduling API (namespace
	// names it); local is set when it was read from the state alone (a
	// running syncd holds it).
	SignIn func(ctx context.Context, namespace string) (tok oauth.Token, local bool, err error)
}

// Validate runs the checks one after the other and reports each as it
// ends: the API key and forms of each account, the output, the spool
// folder, the state, each account's scheduling sign-in, then the other
// listed sources that can be probed. failed counts the checks that
// failed; err is only that Accounts names an account the configuration
// does not have.
func (v Validation) Validate(ctx context.Context, report func(Check)) (failed int, err error) {
	cfg := v.Config
	for _, w := range cfg.QuotaWarnings(time.Now()) {
		report(Check{CheckWarn, "quota: " + w})
	}
	for _, w := range cfg.PausedForms() {
		report(Check{CheckWarn, "config: " + w})
	}
	accounts, err := SelectAccounts(cfg, v.Accounts)
	if err != nil {
		return 0, err
	}
	// A short per-request timeout and few attempts: an API that
	// accepts connections and never answers is reported in seconds.
	vcfg := *cfg
	vcfg.Source.Timeout = config.Duration(min(cfg.Source.Timeout.D(), requestTimeout))
	vcfg.Source.MaxAttempts = min(cfg.Source.MaxAttempts, requestAttempts)
	apiCtx, cancel := context.WithTimeout(ctx, apiBudget)
	defer cancel()
	for _, acct := range accounts {
		failed += v.validateSources(apiCtx, &vcfg, acct, report)
	}
	failed += v.checkOutput(ctx, report)
	schedCtx, cancelSched := context.WithTimeout(ctx, checkBudget)
	defer cancelSched()
	for _, acct := range accounts {
		if !acct.Scheduling {
			continue
		}
		if err := v.checkScheduling(schedCtx, acct, report); err != nil {
			report(Check{CheckFail, "scheduling" + v.who(acct) + ": " + err.Error()})
			failed++
		}
	}
	// The other listed sources that can be tried without syncing.
	for _, acct := range accounts {
		for _, p := range ProbeSources(schedCtx, cfg, acct, v.Log) {
			if p.Err != nil {
				report(Check{CheckFail, p.Source + v.who(acct) + ": " + p.Err.Error()})
				failed++
				continue
			}
			report(Check{CheckOK, p.Source + v.who(acct)})
		}
	}
	return failed, nil
}

// who names the account in a check's text, when the configuration has
// many.
func (v Validation) who(acct config.Account) string {
	if v.Config.MultiAccount() {
		return " of account " + acct.Name
	}
	return ""
}

// validateSources runs the checks of the listed sources that validate an
// account against their service (source.Validator: the forms' key and
// each configured form); it returns how many failed.
func (v Validation) validateSources(ctx context.Context, cfg *config.Config, acct config.Account, report func(Check)) int {
	failed := 0
	env := source.Env{Config: cfg, Account: acct, Store: readOnlyState{cfg: cfg}, Log: v.Log}
	for _, src := range sourceList() {
		val, ok := src.(source.Validator)
		if !ok {
			continue
		}
		n, _ := val.Validate(ctx, env, v.who(acct), func(ok bool, text string) {
			if ok {
				report(Check{CheckOK, text})
			} else {
				report(Check{CheckFail, text})
			}
		})
		failed += n
	}
	return failed
}

// checkOutput checks the sink (a probe write), the spool folder and the
// state; it returns how many of them failed.
func (v Validation) checkOutput(ctx context.Context, report func(Check)) int {
	bad := 0
	sinkCtx, cancelSink := context.WithTimeout(ctx, checkBudget)
	defer cancelSink()
	if msg, warn, err := ProbeOutput(sinkCtx, v.Config, v.Log); err != nil {
		report(Check{CheckFail, "sink: " + err.Error()})
		bad++
	} else {
		if warn != "" {
			report(Check{CheckWarn, "sink: " + warn})
		}
		report(Check{CheckOK, "sink " + msg})
	}
	if dir, err := spool.CheckDir(v.Config.Sync.SpoolDir); err != nil {
		report(Check{CheckFail, "spool: " + err.Error()})
		bad++
	} else {
		report(Check{CheckOK, "spool " + dir + " (a scratch folder was made and removed)"})
	}
	stateCtx, cancelState := context.WithTimeout(ctx, checkBudget)
	defer cancelState()
	if !v.checkState(stateCtx, report) {
		bad++
	}
	return bad
}

// checkState reads the state's view and reports it; false when it failed
// (unreadable, or a stream's record damaged).
func (v Validation) checkState(ctx context.Context, report func(Check)) bool {
	view, err := v.State(ctx)
	if err != nil {
		report(Check{CheckFail, "state: " + err.Error()})
		return false
	}
	damaged := 0
	for _, f := range view.Forms {
		if f.Damaged != "" {
			report(Check{CheckFail, "state: " + f.Damaged})
			damaged++
		}
	}
	switch {
	case damaged > 0:
		return false
	case view.Source == "daemon":
		report(Check{CheckOK, "state " + view.State + " (in use by the running syncd; read through its /status)"})
	default:
		report(Check{CheckOK, "state " + view.State})
	}
	return true
}

// checkScheduling says who syncd is signed in to the scheduling API as,
// and whether the client is a legacy one (with the migration's first step);
// it needs no request. Not signed in is an error naming auth login.
func (v Validation) checkScheduling(ctx context.Context, acct config.Account, report func(Check)) error {
	tok, local, err := v.SignIn(ctx, acct.Namespace())
	if errors.Is(err, oauth.ErrNoToken) {
		if v.Config.MultiAccount() {
			return fmt.Errorf("not signed in: run `syncd auth login --account %s`", acct.Name)
		}
		return errors.New("not signed in: run `syncd auth login`")
	}
	if err != nil {
		return fmt.Errorf("the sign-in of %s does not work: %w", textfmt.OrDash(tok.User), err)
	}
	scopes := strings.Join(tok.Scopes, " ")
	if tok.Legacy || len(tok.Scopes) == 0 {
		scopes = "none (a legacy client: " + oauth.LegacyMigrationStep + ")"
	}
	how := "the token endpoint accepted it"
	if local {
		how = "checked in the state only: a running syncd holds it"
	}
	report(Check{CheckOK, fmt.Sprintf("scheduling%s: signed in as %s, scopes %s (%s)", v.who(acct), textfmt.OrDash(tok.User), scopes, how)})
	return nil
}

// CheckJSON is one check of `syncd validate -o json`.
type CheckJSON struct {
	Status  string `json:"status"` // ok, warn, fail
	Check   string `json:"check"`  // what was checked: config, api key, form ID, sink, spool, state, ...
	Message string `json:"message"`
}

// ChecksJSON is the checks of the lines validate printed ("ok   X",
// "WARN X: ...", "FAIL X: ..."), one per line: a message of many lines
// gives a check for each of its lines, as it always has.
func ChecksJSON(text string) []CheckJSON {
	checks := []CheckJSON{}
	for {
		line, rest, ok := strings.Cut(text, "\n")
		if !ok {
			break
		}
		checks = append(checks, checkOfLine(line))
		text = rest
	}
	if rest := strings.TrimSpace(text); rest != "" {
		checks = append(checks, checkOfLine(rest))
	}
	return checks
}

func checkOfLine(line string) CheckJSON {
	status, text := CheckOK, line
	for prefix, st := range map[string]string{"ok   ": CheckOK, "WARN ": CheckWarn, "FAIL ": CheckFail} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			status, text = st, rest
		}
	}
	check, msg, ok := strings.Cut(text, ": ")
	if !ok {
		check, msg = text, ""
	}
	return CheckJSON{Status: status, Check: check, Message: msg}
}
