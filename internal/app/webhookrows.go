package app

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
)

// KeepWebhooks is the rows of the accounts names names (--account); all
// of them when names is empty. It is never nil.
func KeepWebhooks(rows []WebhookRow, names []string) []WebhookRow {
	kept := []WebhookRow{}
	for _, r := range rows {
		if len(names) == 0 || slices.Contains(names, r.Account) {
			kept = append(kept, r)
		}
	}
	return kept
}

// RemoveWebhooks deletes the webhooks every opened account registered, at
// the services and in the state (Account.RemoveWebhooks), and returns
// those removed (never nil). An account whose webhooks could not all be
// removed is logged, and the others are still removed; err is the last
// such failure.
func (a *App) RemoveWebhooks(ctx context.Context) (removed []WebhookRow, err error) {
	removed = []WebhookRow{}
	for _, acct := range a.Accounts {
		rows, rerr := acct.RemoveWebhooks(ctx)
		removed = append(removed, rows...)
		if rerr != nil {
			acct.Log.Error("some webhooks could not be removed; they stay in the state, and removing again retries them", zap.Error(rerr))
			err = rerr
		}
	}
	return removed, err
}

// WebhooksTable is the webhooks as `syncd webhooks` lists them: its
// header and one row per webhook.
func WebhooksTable(rows []WebhookRow) (header []string, table [][]string) {
	header = []string{"ACCOUNT", "SOURCE", "STREAM", "WEBHOOK ID", "REGISTERED"}
	table = make([][]string, 0, len(rows))
	for _, r := range rows {
		table = append(table, []string{r.Account, r.Source, r.Stream, r.ID, r.Registered.Format(time.RFC3339)})
	}
	return header, table
}
