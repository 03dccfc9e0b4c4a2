package app

import (
	"slices"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
)

// TestLoginSources: `syncd auth --source` finds each source it signs in to
// through the list, by name, and the refusals of a configuration or an
// account that does not sign in there are the source's.
func TestLoginSources(t *testing.T) {
	for _, name := range []string{SignInScheduling, SignInForms} {
		if _, err := LoginSource(name); err != nil {
			t.Errorf("LoginSource(%q): %v", name, err)
		}
		if err := SignInSection(&config.Config{}, name); err == nil {
			t.Errorf("SignInSection(%q) of a configuration without its section: nil", name)
		}
		if err := SignsIn(config.Account{Name: "a"}, name); err == nil {
			t.Errorf("SignsIn(%q) of an account that signs in nowhere: nil", name)
		}
	}
	if _, err := LoginSource("nowhere"); err == nil {
		t.Error(`LoginSource("nowhere"): nil`)
	}
	if _, ok := ListedSource(SignInScheduling).(source.Connector); !ok {
		t.Error("the scheduling source is not a source.Connector: the connect page has no sign-in")
	}
}

// TestSecretNamesOfEverySignIn: a restore keeps the sign-in of every
// source an account signs in to, and nothing of one that signs in
// nowhere.
func TestSecretNamesOfEverySignIn(t *testing.T) {
	cfg := &config.Config{Accounts: []config.Account{
		{Name: "both", Scheduling: true, FormsOAuth: true},
		{Name: "key"},
	}}
	names := secretNames(cfg)
	want := []string{formsource.TokenSecret("both"), scheduling.TokenSecret("both")}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("secretNames = %q, want %q", names, want)
	}
}
