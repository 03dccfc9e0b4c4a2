package forms

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
)

// A form's webhook is one per form, at a URL that carries the form's path
// token (WebhookURL). The Forms API cannot list webhooks: the state's
// record is all syncd knows of them, and a webhook that went silent is
// registered again by the app.

var (
	_ source.WebhookSource    = Source{}
	_ source.WebhookRegistrar = (*Account)(nil)
)

// Webhooks: one webhook per form.
func (Source) Webhooks() source.WebhookInfo {
	return source.WebhookInfo{
		Failed: "registering the form's webhook failed; its submissions arrive by polling, and the next pass tries again",
	}
}

// Receives reports whether the account may have form formID: any form it
// does not exclude (its listing is the other replica's).
func (Source) Receives(acct config.Account, formID string) bool {
	return !slices.Contains(acct.Exclude, formID)
}

// WebhookIdent is the hash of the form's webhook URL: the URL holds the
// path token, derived from the secret, so it covers both.
func (a *Account) WebhookIdent(w source.Webhook) string {
	return source.HashIdent(WebhookURL(w.PublicURL, w.Secret, w.Account, w.Stream))
}

// RegisterWebhook creates the form's webhook. The one it replaces is left
// for the caller to delete once the new one is recorded: until then it
// is the one the record names.
func (a *Account) RegisterWebhook(ctx context.Context, w source.Webhook, old string) (source.Registration, error) {
	client := a.Client()
	if client == nil {
		return source.Registration{}, fmt.Errorf("register the webhook of form %s: account %s has no Forms API sign-in", w.Stream, a.ac.Name)
	}
	id, err := client.CreateWebhook(ctx, w.Stream, WebhookURL(w.PublicURL, w.Secret, w.Account, w.Stream))
	if err != nil {
		return source.Registration{}, err
	}
	return source.Registration{ID: strconv.FormatInt(id, 10), Stale: old}, nil
}
