package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// Reader is one account's sources opened to read only, for a command that
// checks the stream ids it names before it opens anything, or plans a dry
// run: it writes no state and refreshes no sign-in. Its Forms API client
// counts its requests (every attempt), which a plan reports.
type Reader struct {
	cfg      *config.Config
	acct     config.Account
	log      *zap.Logger
	forms    *formsource.Account
	requests *requestCounter
}

// NotSelectedError is a form id a command names that the account never
// syncs (formsource.NotSelectedError).
type NotSelectedError = formsource.NotSelectedError

// OpenReader opens account ac of cfg to read only. An account without
// forms cannot be read (yet): every command that reads one names forms.
func OpenReader(ctx context.Context, cfg *config.Config, ac config.Account, log *zap.Logger) (*Reader, error) {
	if !ac.HasForms() {
		return nil, fmt.Errorf("account %s has no Forms API key: this command reads forms", ac.Name)
	}
	counter := &requestCounter{}
	client, _, err := ReadClient(ctx, cfg, ac, log, counter)
	if err != nil {
		return nil, err
	}
	return &Reader{cfg: cfg, acct: ac, log: log, forms: formsource.Offline(cfg, ac, client), requests: counter}, nil
}

// Config is the configuration the reader was opened with.
func (r *Reader) Config() *config.Config { return r.cfg }

// Select checks the stream ids a command names to sync, before anything is
// written (source.Selector's Select): IsBadID tells an id refused from a
// failure to ask.
func (r *Reader) Select(ctx context.Context, ids []string) error {
	return r.forms.Select(ctx, ids)
}

// Check makes sure every id names a stream the account has
// (source.Selector's Check), whether or not its configuration syncs it.
func (r *Reader) Check(ctx context.Context, ids []string) error {
	return r.forms.Check(ctx, ids)
}

// IsBadID reports whether err, of Select or Check, refuses an id (one the
// account does not have, or never syncs), rather than failing to ask.
func IsBadID(err error) bool {
	var unknown *UnknownFormError
	var notSelected *NotSelectedError
	return errors.As(err, &unknown) || errors.As(err, &notSelected)
}

// Jobs are the jobs of ids (each once), or every job of the account when
// ids is empty.
func (r *Reader) Jobs(ctx context.Context, ids []string) ([]poller.Job, error) {
	return jobsOf(ctx, r.forms.Jobs, func(id string) poller.Job { return formsource.JobOf(r.cfg, r.acct, id) }, ids)
}

// JobsOf is what a pass of the forms a command names runs (Pass): the jobs
// of ids (each once), or every job of the account when ids is empty.
func (acct *Account) JobsOf(ids []string) func(context.Context) ([]poller.Job, error) {
	return func(ctx context.Context) ([]poller.Job, error) { return jobsOf(ctx, acct.Jobs, acct.Job, ids) }
}

// jobsOf are the jobs of ids, or all of them when ids is empty.
func jobsOf(ctx context.Context, all func(context.Context) ([]poller.Job, error), one func(string) poller.Job, ids []string) ([]poller.Job, error) {
	if len(ids) == 0 {
		return all(ctx)
	}
	jobs := make([]poller.Job, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			jobs = append(jobs, one(id))
		}
	}
	return jobs, nil
}

// requestCounter counts the Forms API requests a client makes (every
// attempt); it is a forms.Observer.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) ObserveRequest(string, int, int, time.Duration, error) { c.n.Add(1) }

// FormsClient is the Forms API client, for the commands that still hold
// one and import no source.
type FormsClient = forms.Client

// OneAccount is the configured account a command for one account works
// on, before anything is opened: the one names selects (--account), or
// the only account; an *AccountNeededError when that is not one.
func OneAccount(cfg *config.Config, names []string) (config.Account, error) {
	list, err := SelectAccounts(cfg, names)
	if err != nil {
		return config.Account{}, err
	}
	if len(list) != 1 {
		names := make([]string, 0, len(list))
		for _, a := range list {
			names = append(names, a.Name)
		}
		return config.Account{}, &AccountNeededError{Names: names}
	}
	return list[0], nil
}
