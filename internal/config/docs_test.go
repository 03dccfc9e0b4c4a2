package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEveryKeyDocumented: every key of the configuration (its yaml tags)
// is in the README's key table and in the commented example file, and the
// example file, with its commented sections, is a valid configuration.
func TestEveryKeyDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../configs/syncd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return "key", k == "FORMS_API_KEY" }
	if _, err := Parse("syncd.example.yaml", example, env); err != nil {
		t.Errorf("the example config is not valid: %v", err)
	}
	// The example with its commented sections uncommented (the BigQuery
	// sink, a form) must hold every key, at its place.
	uncommented := regexp.MustCompile(`(?m)^(\s*)# ?(\s*(?:- )?[a-z_]+:)`).ReplaceAll(example, []byte("$1$2"))
	uncommented = regexp.MustCompile(`(?m)^forms: \[\]`).ReplaceAll(uncommented, []byte("forms:"))
	uncommented = regexp.MustCompile(`(?m)^(\s*)url: .*$`).ReplaceAll(uncommented, []byte("${1}url: \"\""))
	full, err := Parse("syncd.example.yaml (uncommented)", uncommented, env)
	if err != nil {
		t.Fatalf("the example config with its comments removed is not valid: %v\n%s", err, uncommented)
	}
	// The accounts list is documented in its own example: a file has it or
	// the single account's source.api_key and forms, never both.
	accountsExample, err := os.ReadFile("../../configs/accounts.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	accountsEnv := func(k string) (string, bool) { return "key-of-the-example-0123456789", true }
	accounts, err := Parse("accounts.example.yaml", accountsExample, accountsEnv)
	if err != nil {
		t.Fatalf("the accounts example config is not valid: %v", err)
	}
	for _, key := range Keys() {
		if !strings.Contains(string(readme), "| `"+key+"` |") {
			t.Errorf("README.md: the configuration table has no row for %s", key)
		}
		if rest, ok := strings.CutPrefix(key, "accounts[]."); ok {
			// One account cannot hold every key (api_key or api_key_file):
			// any account of the example may show it.
			found := false
			for i := 0; i < 10 && !found; i++ {
				found = accounts.Line(fmt.Sprintf("accounts[%d].%s", i, strings.ReplaceAll(rest, "[]", "[0]"))) > 0
			}
			if !found {
				t.Errorf("configs/accounts.example.yaml does not list %s", key)
			}
			continue
		}
		if full.Line(strings.ReplaceAll(key, "[]", "[0]")) == 0 {
			t.Errorf("configs/syncd.example.yaml does not list %s", key)
		}
	}
}
