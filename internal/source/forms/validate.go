package forms

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/suggest"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

var _ source.Validator = Source{}

// Validate checks the account's key (or stored sign-in) by the forms it
// sees, then each form its configuration lists; an id the account does
// not have is named with the closest ones.
func (s Source) Validate(ctx context.Context, env source.Env, who string, report func(ok bool, text string)) (failed int, used bool) {
	acct := env.Account
	if !acct.HasForms() {
		return 0, false
	}
	client, err := s.readClient(ctx, env)
	if err != nil {
		report(false, "api"+who+": "+err.Error())
		return 1, true
	}
	base := client.BaseURL() // a forms_oauth sign-in's own
	var budget time.Duration // what the checks may wait in all, for messages
	if d, ok := ctx.Deadline(); ok {
		budget = time.Until(d).Round(time.Second)
	}
	list, err := client.ListForms(ctx)
	if err != nil {
		report(false, "api"+who+": "+apiFailure(base, err, budget))
		return 1, true
	}
	report(true, fmt.Sprintf("api key%s: %s visible at %s", who, textfmt.Plural(int64(len(list)), "form"), base))
	known := make([]string, 0, len(list))
	for _, f := range list {
		known = append(known, f.FormID)
	}
	for _, f := range acct.Forms {
		if _, err := client.GetForm(ctx, f.ID); err != nil {
			if p := suggest.Phrase(f.ID, known); source.Is(err, source.NotFound) && p != "" {
				report(false, fmt.Sprintf("form %s%s: form %s does not exist in the account (%s): fix its id in forms[]", f.ID, who, f.ID, p))
				failed++
				continue
			}
			report(false, fmt.Sprintf("form %s%s: %s", f.ID, who, apiFailure(base, err, budget)))
			failed++
			continue
		}
		report(true, fmt.Sprintf("form %s%s", f.ID, who))
	}
	return failed, true
}

// apiFailure words a failed API check: an API that never answered is
// named as such, with the time waited.
func apiFailure(baseURL string, err error, budget time.Duration) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "no answer within") {
		return fmt.Sprintf("no answer from %s within %s: the server accepts connections but does not answer; check source.base_url, a proxy or firewall in between, and the service's status (%v)",
			baseURL, budget, err)
	}
	if source.Is(err, source.Unavailable) || source.Is(err, source.RateLimited) {
		return fmt.Sprintf("%s did not answer usably: %v", baseURL, err)
	}
	return err.Error()
}
