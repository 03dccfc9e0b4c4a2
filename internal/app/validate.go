package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/suggest"
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
		if acct.HasForms() {
			failed += v.checkForms(apiCtx, &vcfg, acct, report)
		}
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

// checkForms checks the account's API key (the forms it sees) and each of
// its configured forms; it returns how many checks failed.
func (v Validation) checkForms(ctx context.Context, cfg *config.Config, acct config.Account, report func(Check)) int {
	who := v.who(acct)
	client, base, err := ReadClient(ctx, cfg, acct, v.Log, nil)
	if err != nil {
		report(Check{CheckFail, "api" + who + ": " + err.Error()})
		return 1
	}
	acct.BaseURL = base // a forms_oauth sign-in's own
	list, err := client.ListForms(ctx)
	if err != nil {
		report(Check{CheckFail, "api" + who + ": " + apiFailure(acct.BaseURL, err)})
		return 1
	}
	report(Check{CheckOK, fmt.Sprintf("api key%s: %s visible at %s", who, textfmt.Plural(int64(len(list)), "form"), acct.BaseURL)})
	known := make([]string, 0, len(list))
	for _, f := range list {
		known = append(known, f.FormID)
	}
	bad := 0
	for _, f := range acct.Forms {
		if _, err := client.GetForm(ctx, f.ID); err != nil {
			if p := suggest.Phrase(f.ID, known); IsSourceError(err, SourceNotFound) && p != "" {
				report(Check{CheckFail, fmt.Sprintf("form %s%s: form %s does not exist in the account (%s): fix its id in forms[]", f.ID, who, f.ID, p)})
				bad++
				continue
			}
			report(Check{CheckFail, fmt.Sprintf("form %s%s: %s", f.ID, who, apiFailure(acct.BaseURL, err))})
			bad++
			continue
		}
		report(Check{CheckOK, fmt.Sprintf("form %s%s", f.ID, who)})
	}
	return bad
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

// apiFailure words a failed API check: an API that never answered is
// named as such, with the time waited.
func apiFailure(baseURL string, err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "no answer within") {
		return fmt.Sprintf("no answer from %s within %s: the server accepts connections but does not answer; check source.base_url, a proxy or firewall in between, and the service's status (%v)",
			baseURL, apiBudget, err)
	}
	if IsSourceError(err, SourceUnavailable) || IsSourceError(err, SourceRateLimited) {
		return fmt.Sprintf("%s did not answer usably: %v", baseURL, err)
	}
	return err.Error()
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
