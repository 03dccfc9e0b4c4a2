package forms

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/suggest"
)

// NotSelectedError is a form id a command names that the account never
// syncs: empty, excluded, not among the forms the configuration lists, or
// carrying none of the tags the account selects forms by.
type NotSelectedError struct {
	ID  string
	err error
}

func (e *NotSelectedError) Error() string { return e.err.Error() }

// Is makes errors.Is(err, source.ErrBadID) true: the command named a form
// the account never syncs.
func (e *NotSelectedError) Is(target error) bool { return target == source.ErrBadID }

// Select checks the form ids a command names to sync (--form of once,
// backfill, refresh and reconcile), before anything is written: an empty
// id, one the account excludes (never synced), one a config that lists
// forms does not list, or one without any of the tags an account that
// selects its forms by tag names (never synced either) is a
// *NotSelectedError; one the account does not have an *UnknownFormError
// (Check, with the closest ids). Ids of the config are not checked here:
// one the account no longer has fails its own pass, and the other forms
// sync.
func (a *Account) Select(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return &NotSelectedError{ID: id, err: errors.New("--form is empty: give a form id (`syncd forms` lists them); nothing was written")}
		}
		if slices.Contains(a.ac.Exclude, id) {
			return &NotSelectedError{ID: id, err: fmt.Errorf("--form %s is excluded by account %s (accounts[].exclude), and an excluded form is never synced: remove it from exclude in the config first; nothing was written", id, a.ac.Name)}
		}
	}
	if len(a.ac.Tags) > 0 {
		return a.checkTagged(ctx, ids)
	}
	if len(a.ac.Forms) == 0 {
		return a.Check(ctx, ids)
	}
	configured := make([]string, 0, len(a.ac.Forms))
	have := map[string]bool{}
	for _, f := range a.ac.Forms {
		configured = append(configured, f.ID)
		have[f.ID] = true
	}
	for _, id := range ids {
		if !have[id] {
			msg := fmt.Sprintf("--form %s is not one of the forms this config lists", id)
			if p := suggest.Phrase(id, configured); p != "" {
				msg += " (" + p + ")"
			}
			return &NotSelectedError{ID: id, err: errors.New(msg + ": add it under forms: in the config, or pick one of " + strings.Join(configured, ", ") + "; nothing was written")}
		}
	}
	return a.Check(ctx, ids)
}

// checkTagged is Check for an account that selects its forms by tag
// (accounts[].tags), with the same one request: an id the account does
// not have, or a form that carries none of the tags (the pass of the
// account never syncs it), is refused.
func (a *Account) checkTagged(ctx context.Context, ids []string) error {
	list, err := ListAndCheck(ctx, a.Client(), ids)
	if err != nil {
		return err
	}
	tags := make(map[string][]string, len(list))
	for _, f := range list {
		tags[f.FormID] = f.Tags
	}
	for _, id := range ids {
		if HasAnyTag(tags[id], a.ac.Tags) { // the pass's own rule
			continue
		}
		has := "the form has no tags"
		if len(tags[id]) > 0 {
			has = "the form's: " + strings.Join(tags[id], ", ")
		}
		return &NotSelectedError{ID: id, err: fmt.Errorf("--form %s is not selected by account %s: it carries none of the tags the account selects forms by (accounts[].tags: %s; %s), so it is never synced: give the form one of those tags, or add one of its tags to the account's tags in the config; nothing was written",
			id, a.ac.Name, strings.Join(a.ac.Tags, ", "), has)}
	}
	return nil
}
