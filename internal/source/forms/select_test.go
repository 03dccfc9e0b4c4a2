package forms

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
)

func TestAccountSelectRefusesWhatThePassNeverSyncs(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		ac   config.Account
		ids  []string
		want string // in the error; "" for none
	}{
		{"a form of the account", config.Account{Name: "acme"}, []string{"alpha1"}, ""},
		{"empty", config.Account{Name: "acme"}, []string{" "}, "--form is empty"},
		{"excluded", config.Account{Name: "acme", Exclude: []string{"beta22"}}, []string{"beta22"}, "--form beta22 is excluded by account acme"},
		{"not listed", config.Account{Name: "acme", Forms: []config.FormConfig{{ID: "alpha1"}}}, []string{"gamma3"}, "--form gamma3 is not one of the forms this config lists"},
		{"without the tags", config.Account{Name: "acme", Tags: []string{"t"}}, []string{"beta22"}, "--form beta22 is not selected by account acme: it carries none of the tags"},
		{"tagged", config.Account{Name: "acme", Tags: []string{"t"}}, []string{"gamma3"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := openTestAccount(t, tt.ac, false).Select(ctx, tt.ids)
			var ns *NotSelectedError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Select(%v) = %v, want nil", tt.ids, err)
			case tt.want != "" && (!errors.As(err, &ns) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Select(%v) = %v, want a NotSelectedError saying %q", tt.ids, err, tt.want)
			}
		})
	}
	var unknown *UnknownFormError
	if err := openTestAccount(t, config.Account{Name: "acme", Tags: []string{"t"}}, false).Select(ctx, []string{"beta2"}); !errors.As(err, &unknown) {
		t.Fatalf("Select of a typo = %v, want an UnknownFormError", err)
	}
}
