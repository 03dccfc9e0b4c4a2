package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestAccountsValid(t *testing.T) {
	raw := `
source: {base_url: http://127.0.0.1:1/v1/api}
scheduling: {client_id: c}
accounts:
  - name: acme
    api_key: ${ACME}
    forms: [{id: f1, table: signups}]
  - name: globex-eu
    base_url: http://127.0.0.1:2/v1/api
    api_key_file: keys/globex
    tags: [export]
    exclude: [f9]
  - name: initech
    scheduling: true
`
	cfg, err := Parse("t.yaml", []byte(raw), env(map[string]string{"ACME": "sk_acme"}))
	if err != nil {
		t.Fatal(err)
	}
	list := cfg.AccountList()
	if len(list) != 3 || !cfg.MultiAccount() {
		t.Fatalf("accounts = %+v", list)
	}
	if list[0].BaseURL != "http://127.0.0.1:1/v1/api" || list[1].BaseURL != "http://127.0.0.1:2/v1/api" {
		t.Errorf("base URLs = %q, %q: want source.base_url as the default", list[0].BaseURL, list[1].BaseURL)
	}
	if list[0].APIKey.Reveal() != "sk_acme" || !list[1].HasForms() || list[2].HasForms() {
		t.Errorf("keys: %+v", list)
	}
	if list[0].Namespace() != "acme" {
		t.Errorf("namespace = %q", list[0].Namespace())
	}
}

// TestAccountsOfOneAccountConfig: a file without an accounts list is one
// account named default, whose namespace is empty (the layout it always had).
func TestAccountsOfOneAccountConfig(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte("forms: [{id: f1}]\nscheduling: {client_id: c}\n"), env(map[string]string{"FORMS_API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	list := cfg.AccountList()
	if len(list) != 1 || list[0].Name != DefaultAccount || list[0].Namespace() != "" || !list[0].Scheduling || len(list[0].Forms) != 1 || cfg.MultiAccount() {
		t.Errorf("accounts = %+v", list)
	}
}

func TestAccountsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"bad name", "accounts: [{name: Acme, api_key: k}]", "accounts[0].name: \"Acme\" is not an account name"},
		{"reserved", "accounts: [{name: scheduling, api_key: k}]", "scheduling is reserved"},
		{"twice", "accounts: [{name: a, api_key: k}, {name: a, api_key: k}]", "line 1: accounts[1].name: account a is listed twice"},
		{"folded", "accounts: [{name: a-b, api_key: k}, {name: a_b, api_key: k}]", "would share BigQuery table names"},
		{"forms beside", "forms: [{id: f}]\naccounts: [{name: a, api_key: k}]", "forms: is set beside an accounts list"},
		{"key beside", "source: {api_key: k}\naccounts: [{name: a, api_key: k}]", "source.api_key: is set beside an accounts list"},
		{"key and file", "accounts: [{name: a, api_key: k, api_key_file: /k}]", "accounts[0].api_key_file: is set beside api_key"},
		{"nothing", "accounts: [{name: a}]", "account a syncs nothing"},
		{"forms without key", "accounts: [{name: a, forms: [{id: f}]}]", "account a selects forms but has no Forms API key"},
		{"no scheduling section", "accounts: [{name: a, scheduling: true}]", "the file has no scheduling section"},
		{"tags and forms", "accounts: [{name: a, api_key: k, forms: [{id: f}], tags: [x]}]", "select forms by id or by tag"},
		{"bad base url", "accounts: [{name: a, api_key: k, base_url: ftp://x}]", "accounts[0].base_url"},
		{"form twice", "accounts: [{name: a, api_key: k, forms: [{id: f}, {id: f}]}]", "accounts[0].forms[1].id: form f is listed twice"},
		{"unset key env", "accounts: [{name: a, api_key: '${NOPE}'}]", "accounts[0].api_key: environment variable NOPE is not set"},
		{"unknown key", "accounts: [{name: a, apikey: k}]", "unknown key under accounts[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.raw), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestAccountsKeepSecrets: an account's key never prints, and a missing
// FORMS_API_KEY is not needed beside an accounts list.
func TestAccountsKeepSecrets(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte("accounts: [{name: a, api_key: '${K}'}]"), env(map[string]string{"K": "sk_secret_value"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join([]string{cfg.Accounts[0].APIKey.String()}, ""); strings.Contains(s, "sk_secret_value") {
		t.Errorf("the key prints: %s", s)
	}
}

func TestAccountsFormsOAuth(t *testing.T) {
	raw := `
forms_oauth: {client_id: app, client_secret: '${FORMS_SECRET}'}
accounts:
  - name: acme
    forms_oauth: true
    tags: [export]
`
	cfg, err := Parse("t.yaml", []byte(raw), env(map[string]string{"FORMS_SECRET": "fo_secret_value"}))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.FormsOAuth
	if f.AuthorizeURL != "https://build.fillout.com/authorize/oauth" || f.TokenURL != "https://server.fillout.com/public/oauth/accessToken" ||
		f.RedirectURI != "http://127.0.0.1:8977/callback" || f.ClientSecret.Reveal() != "fo_secret_value" {
		t.Errorf("forms_oauth = %+v", f)
	}
	if a := cfg.AccountList()[0]; !a.HasForms() || !a.FormsOAuth {
		t.Errorf("account = %+v", a)
	}
	m, err := cfg.EffectiveMap()
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(m); strings.Contains(s, "fo_secret_value") {
		t.Errorf("the client secret prints: %s", s)
	}
}

func TestAccountsFormsOAuthErrors(t *testing.T) {
	section := "forms_oauth: {client_id: app, client_secret: s}\n"
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"no section", "accounts: [{name: a, forms_oauth: true}]", "accounts[0].forms_oauth: account a signs in to the Forms API with OAuth, but the file has no forms_oauth section"},
		{"beside key", section + "accounts: [{name: a, forms_oauth: true, api_key: k}]", "accounts[0].forms_oauth: is set beside api_key"},
		{"beside file", section + "accounts: [{name: a, forms_oauth: true, api_key_file: /k}]", "accounts[0].forms_oauth: is set beside api_key_file"},
		{"no client id", "forms_oauth: {client_secret: s}\naccounts: [{name: a, forms_oauth: true}]", "forms_oauth.client_id: is empty"},
		{"no client secret", "forms_oauth: {client_id: c}\naccounts: [{name: a, forms_oauth: true}]", "forms_oauth.client_secret: is empty"},
		{"secret env", "forms_oauth: {client_id: c, client_secret: '${NOPE}'}\naccounts: [{name: a, forms_oauth: true}]", "forms_oauth.client_secret: environment variable NOPE is not set"},
		{"redirect", "forms_oauth: {client_id: c, client_secret: s, redirect_uri: 'https://example.com/cb'}\naccounts: [{name: a, forms_oauth: true}]", "forms_oauth.redirect_uri: \"https://example.com/cb\" is not a loopback http URL"},
		{"token url", "forms_oauth: {client_id: c, client_secret: s, token_url: 'ftp://x'}\naccounts: [{name: a, forms_oauth: true}]", "forms_oauth.token_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.raw), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
