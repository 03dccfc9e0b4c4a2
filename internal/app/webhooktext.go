package app

import (
	"fmt"
	"io"

	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteWebhooks writes the webhooks as `syncd webhooks` lists them for a
// person (WebhooksTable).
func WriteWebhooks(w io.Writer, rows []WebhookRow) error {
	header, table := WebhooksTable(rows)
	return textfmt.Table(w, header, table)
}

// WriteRemovedWebhooks writes what `syncd webhooks remove` removed
// (RemoveWebhooks) for a person: a line that says so, then the webhooks.
func WriteRemovedWebhooks(w io.Writer, rows []WebhookRow) error {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no webhook to remove: the state records none")
		return nil
	}
	fmt.Fprintf(w, "removed %s at the services and from the state:\n", textfmt.Plural(int64(len(rows)), "webhook"))
	return WriteWebhooks(w, rows)
}
