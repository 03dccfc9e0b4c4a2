package forms

import (
	"crypto/hmac"
	"errors"

	"github.com/syncd-dev/syncd/internal/poller"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// Endpoint is the forms' side of the webhook receiver. A form's webhook is
// registered at a URL that carries a path token (the Forms API signs
// nothing): {account}/{form}/{token}, the token derived from the
// configured secret, so a guessed path is refused before its body is read.
type Endpoint struct{}

var _ webhook.Endpoint = Endpoint{}

// Source is the forms' name (poller.SourceForms).
func (Endpoint) Source() string { return poller.SourceForms }

// Segments: account, form, token.
func (Endpoint) Segments() int { return 3 }

// Route is the account and form the path names, when its token is the
// form's.
func (Endpoint) Route(secret []byte, segs []string) (account, stream string, ok bool) {
	account, formID, token := segs[0], segs[1], segs[2]
	if !hmac.Equal([]byte(token), []byte(WebhookToken(secret, account, formID))) {
		return "", "", false
	}
	return account, formID, true
}

// Decode reads a submission delivery of form formID. The submission's
// time is what it announces: an import may set one behind the checkpoint,
// which the pass then re-reads. The time is only where to look; the rows
// still come from the API.
func (Endpoint) Decode(formID string, body []byte) (webhook.Delivery, error) {
	d, err := api.DecodeWebhook(body)
	if err != nil {
		return webhook.Delivery{}, errors.New("not a submission delivery")
	}
	if d.FormID != "" && d.FormID != formID {
		return webhook.Delivery{}, errors.New("the delivery is of another form")
	}
	return webhook.Delivery{Announced: d.Submission.SubmissionTime}, nil
}

// WebhookToken is the path token of a form's webhook.
func WebhookToken(secret []byte, account, formID string) string {
	return webhook.Derive(secret, "forms path token", account, formID)[:40]
}

// WebhookURL is the URL syncd registers for a form's webhook: it carries
// the form's path token, so it is never logged.
func WebhookURL(publicURL string, secret []byte, account, formID string) string {
	return webhook.URL(publicURL, poller.SourceForms, account, formID, WebhookToken(secret, account, formID))
}
