package app

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/connect"
	"github.com/syncd-dev/syncd/internal/status"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// KeepAccounts is the accounts of list that names names (--account), in
// list's order; all of them when names is empty. It reuses list's array.
func KeepAccounts(list []status.Account, names []string) []status.Account {
	if len(names) == 0 {
		return list
	}
	kept := list[:0]
	for _, a := range list {
		for _, n := range names {
			if a.Name == n {
				kept = append(kept, a)
			}
		}
	}
	return kept
}

// ConnectLink is an account's connect link: the page where its user signs
// in to the scheduling API by themselves.
type ConnectLink struct {
	Account string `json:"account"`
	URL     string `json:"url"`
}

// ConnectLinks are the connect links of the accounts names names:
// server.public_url/connect?account=NAME&token=T, T signed with
// server.connect_secret for that account alone. An error says what the
// configuration or names lack (no connect_secret, an account unknown or
// that does not sign in to the scheduling API).
func ConnectLinks(cfg *config.Config, names []string) ([]ConnectLink, error) {
	if cfg.Server.ConnectSecret == "" {
		return nil, errors.New("server.connect_secret is not set: set it (and server.public_url) to offer the connect page")
	}
	list, err := SelectAccounts(cfg, names)
	if err != nil {
		return nil, err
	}
	var links []ConnectLink
	for _, a := range list {
		if !a.Scheduling {
			return nil, fmt.Errorf("account %s does not sign in to the scheduling API: set scheduling: true on it", a.Name)
		}
		q := url.Values{"account": {a.Name}, "token": {connect.Token([]byte(cfg.Server.ConnectSecret.Reveal()), a.Name)}}
		links = append(links, ConnectLink{Account: a.Name, URL: strings.TrimRight(cfg.Server.PublicURL, "/") + connect.PathConnect + "?" + q.Encode()})
	}
	return links, nil
}

// KeepAccountStreams keeps the streams of the accounts names names
// (--account).
func KeepAccountStreams(forms []status.Form, names []string) []status.Form {
	keep := map[string]bool{}
	for _, n := range names {
		keep[(&config.Account{Name: n}).Namespace()] = true
	}
	out := make([]status.Form, 0, len(forms))
	for _, f := range forms {
		if ns, _ := tablepkg.SplitStreamKey(f.Stream); keep[ns] {
			out = append(out, f)
		}
	}
	return out
}

// AccountStreamKey is the state's key of a form id given with one
// --account (names): the id within that account's namespace.
func AccountStreamKey(names []string, formID string) string {
	if len(names) != 1 || strings.Contains(formID, "/") {
		return formID
	}
	return tablepkg.StreamKey((&config.Account{Name: names[0]}).Namespace(), formID)
}
