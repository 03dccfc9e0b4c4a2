package app

import (
	"fmt"
	"io"

	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteAccounts writes the accounts as `syncd accounts` lists them for a
// person (AccountsTable), then the note of each that names streams the
// configuration no longer holds (NotConfiguredNote).
func WriteAccounts(w io.Writer, list []status.Account) error {
	header, rows := AccountsTable(list)
	if err := textfmt.Table(w, header, rows); err != nil {
		return err
	}
	for _, a := range list {
		if note := NotConfiguredNote(a); note != "" {
			fmt.Fprintln(w, note)
		}
	}
	return nil
}

// WriteConnectLinks writes the links as `syncd accounts link` lists them
// for a person: an account and its link per line.
func WriteConnectLinks(w io.Writer, links []ConnectLink) error {
	rows := make([][]string, 0, len(links))
	for _, l := range links {
		rows = append(rows, []string{l.Account, l.URL})
	}
	return textfmt.Table(w, []string{"ACCOUNT", "CONNECT LINK"}, rows)
}
