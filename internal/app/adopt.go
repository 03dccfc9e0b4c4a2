package app

// `syncd state adopt` and the adoption after `syncd state restore`: the
// state rebuilt from what the output holds.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/table"
)

// ErrNoInventory refuses an adoption from a sink that cannot list the
// batches of a table.
var ErrNoInventory = errors.New("this sink cannot tell which batches a table holds, so there is nothing to adopt from")

// AdoptArgs splits the STREAM arguments of `state adopt` for acct into
// form ids and whether a stream of another source is named (the bookings:
// a listed source.Namer names it). No argument names every stream: others
// is then set.
func AdoptArgs(acct config.Account, args []string) (forms []string, others bool) {
	others = len(args) == 0
	for _, id := range args {
		if namedByASource(acct, id) {
			others = true
			continue
		}
		forms = append(forms, id)
	}
	return forms, others
}

// namedByASource reports whether a listed source names id a stream of
// acct (source.Namer).
func namedByASource(acct config.Account, id string) bool {
	for _, src := range sourceList() {
		if n, ok := src.(source.Namer); ok && n.Names(acct, id) {
			return true
		}
	}
	return false
}

// FormsSelector is the forms source's Selector of acct for a command that
// only reads the API, before anything is opened: opened to read only
// (source.ReadOnly), through its key or the sign-in the state holds now.
func FormsSelector(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger) (source.Selector, error) {
	a, err := readOnlyForms(ctx, source.Env{Config: cfg, Account: acct, Store: readOnlyState{cfg: cfg}, Log: log})
	if err != nil {
		return nil, err
	}
	sel, ok := a.(source.Selector)
	if !ok {
		return nil, fmt.Errorf("the %s source cannot check the form ids of account %s", poller.SourceForms, acct.Name)
	}
	return sel, nil
}

// CanAdopt refuses (ErrNoInventory) an account whose sink cannot tell
// which batches a table holds.
func (acct *Account) CanAdopt() error {
	if _, ok := acct.Sink.(sink.Inventory); !ok {
		return ErrNoInventory
	}
	return nil
}

// Adopt rebuilds the state of the forms of jobs and, when others is set,
// of the account's other streams (AdoptTargets), from the output. A
// stream that fails is one of failed, and the others are adopted still;
// err is a failure to list the streams.
func (acct *Account) Adopt(ctx context.Context, jobs []poller.Job, others bool) (adopted []poller.AdoptResult, failed []error, err error) {
	targets, err := acct.AdoptTargets(ctx, jobs, others)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range targets {
		r, err := acct.Poller.Adopt(ctx, t)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		adopted = append(adopted, r)
	}
	return adopted, failed, nil
}

// AdoptRestored adopts what the output holds of every stream of the
// accounts after a restore: the configured ones and the forms the
// restored state holds beside them, so that the batches committed after
// the backup was taken are never written again. batches were adopted,
// open of them part-written (fetched again by the next pass). A failure
// leaves the restored state as it is and says what to run.
func (a *App) AdoptRestored(ctx context.Context) (batches, open int, err error) {
	// The forms the restored state holds, beside the configured ones.
	list, err := a.Store.List(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, acct := range a.Accounts {
		jobs, err := acct.Jobs(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("the state is restored, but the forms of account %s to adopt could not be listed (%w): run `syncd state adopt` before the next pass, or the rows committed since the backup are written again", acct.Name, err)
		}
		have := map[string]bool{}
		for _, j := range jobs {
			have[j.Stream] = true
		}
		for _, st := range list {
			ns, key := table.SplitStreamKey(st.Key)
			if ns == acct.Cfg.Namespace() && acct.jobs != nil && !have[key] && !strings.Contains(key, "/") {
				jobs = append(jobs, acct.Job(key))
			}
		}
		targets, err := acct.AdoptTargets(ctx, jobs, true)
		if err != nil {
			return 0, 0, fmt.Errorf("the state is restored, but %w: run `syncd state adopt` before the next pass", err)
		}
		for _, t := range targets {
			r, err := acct.Poller.Adopt(ctx, t)
			if err != nil {
				return 0, 0, fmt.Errorf("the state is restored, but %w: run `syncd state adopt` before the next pass", err)
			}
			batches += r.Batches
			open += r.Open
		}
	}
	return batches, open, nil
}
