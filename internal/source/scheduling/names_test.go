package scheduling

import (
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
)

var _ source.Namer = Source{}

func TestNamesTheBookingsOfAnAccountThatSignsIn(t *testing.T) {
	acme := config.Account{Name: "acme", Scheduling: true}
	for _, tc := range []struct {
		acct config.Account
		arg  string
		want bool
	}{
		{acme, StreamKey, true},
		{acme, "acme/" + StreamKey, true},
		{acme, "other/" + StreamKey, false},
		{acme, "vLp2aX", false},
		{config.Account{Name: "initech"}, StreamKey, false},
	} {
		if got := (Source{}).Names(tc.acct, tc.arg); got != tc.want {
			t.Errorf("Names(%s, %q) = %v, want %v", tc.acct.Name, tc.arg, got, tc.want)
		}
	}
}
