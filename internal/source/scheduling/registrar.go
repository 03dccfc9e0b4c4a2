package scheduling

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
)

// An account's bookings have one webhook, registered for its scheduling
// user at the account's URL (WebhookURL) and signed with the account's
// signing secret (SigningSecret). The API lists the user's webhooks: a
// recorded one is checked before each pass, and registered again when it
// disappeared.

var (
	_ source.WebhookSource    = Source{}
	_ source.WebhookRegistrar = (*Account)(nil)
	_ source.WebhookVerifier  = (*Account)(nil)
)

// Webhooks: one webhook covers the account's bookings.
func (Source) Webhooks() source.WebhookInfo {
	return source.WebhookInfo{
		Covers:  "bookings",
		Failed:  "registering the bookings webhook failed; bookings arrive by polling, and the next pass tries again",
		NoScope: "the scheduling sign-in lacks WEBHOOK_WRITE: bookings arrive by polling only; sign in again with that scope for webhooks",
	}
}

// Receives reports whether the account signs in to the scheduling API:
// its deliveries name no stream.
func (Source) Receives(acct config.Account, _ string) bool { return acct.Scheduling }

// WebhookIdent is the hash of the account's URL and signing secret: the
// URL does not change with the secret.
func (a *Account) WebhookIdent(w source.Webhook) string {
	return source.HashIdent(WebhookURL(w.PublicURL, w.Account), SigningSecret(w.Secret, w.Account))
}

// WebhookExists reports whether the user still has the webhook of id,
// active, at the account's URL. Without WEBHOOK_READ the record is all
// syncd can know: it reports true.
func (a *Account) WebhookExists(ctx context.Context, w source.Webhook, id string) (bool, error) {
	list, err := a.Client.ListWebhooks(ctx)
	var se *oauth.ScopeError
	if errors.As(err, &se) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("list the scheduling webhooks: %w", err)
	}
	u := WebhookURL(w.PublicURL, w.Account)
	return slices.ContainsFunc(list, func(h Webhook) bool { return h.ID == id && h.SubscriberURL == u && h.Active }), nil
}

// RegisterWebhook subscribes the account's URL to the booking events. The
// webhook it replaces goes first, whether inactive, lost, or of another
// URL or secret: the API refuses a second webhook at one URL. A sign-in
// without WEBHOOK_WRITE is source.ErrNoWebhookScope.
func (a *Account) RegisterWebhook(ctx context.Context, w source.Webhook, old string) (source.Registration, error) {
	c := a.Client
	if old != "" {
		_ = c.DeleteWebhook(ctx, old) // gone either way: a failure shows in the create's conflict
	}
	u, signing := WebhookURL(w.PublicURL, w.Account), SigningSecret(w.Secret, w.Account)
	id, err := c.CreateWebhook(ctx, u, signing)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		// The user has a webhook at this URL that the state does not know
		// (a state restored or reset): its secret may be another's; it is
		// replaced.
		if list, lerr := c.ListWebhooks(ctx); lerr == nil {
			for _, h := range list {
				if h.SubscriberURL == u {
					_ = c.DeleteWebhook(ctx, h.ID)
				}
			}
			id, err = c.CreateWebhook(ctx, u, signing)
		}
	}
	var se *oauth.ScopeError
	if errors.As(err, &se) {
		return source.Registration{}, fmt.Errorf("%w: %w", source.ErrNoWebhookScope, err)
	}
	if err != nil {
		return source.Registration{}, err
	}
	return source.Registration{ID: id}, nil
}
