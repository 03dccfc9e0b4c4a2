package forms

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
)

// openTestAccount opens the forms source of an account with a key over a
// Forms API that lists three forms, and answers 401 when refuse is set.
func openTestAccount(t *testing.T, ac config.Account, refuse bool) *Account {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse {
			http.Error(w, `{"message":"bad key"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/forms" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"formId":"alpha1","tags":["t"]},{"formId":"beta22","tags":["u"]},{"formId":"gamma3","tags":["t"]}]`))
	}))
	t.Cleanup(srv.Close)
	cfg := config.Defaults()
	cfg.Source.MaxAttempts = 1
	ac.BaseURL, ac.APIKey = srv.URL, "key"
	sa, err := Source{}.Open(context.Background(), source.Env{Config: &cfg, Account: ac, Log: zap.NewNop()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return sa.(*Account)
}

func TestAccountStreamsFollowTagsAndExclude(t *testing.T) {
	a := openTestAccount(t, config.Account{Name: "acme", Tags: []string{"t"}, Exclude: []string{"gamma3"}}, false)
	streams, err := a.Streams(context.Background())
	if err != nil {
		t.Fatalf("Streams: %v", err)
	}
	if len(streams) != 1 || streams[0].Key() != "acme/alpha1" {
		t.Fatalf("streams = %v, want the stream of alpha1 alone", streams)
	}
}

func TestAccountCheckNamesTheClosestIDs(t *testing.T) {
	a := openTestAccount(t, config.Account{Name: "acme"}, false)
	if err := a.Check(context.Background(), []string{"alpha1"}); err != nil {
		t.Fatalf("Check of a form the account has: %v", err)
	}
	err := a.Check(context.Background(), []string{"alpha1", "beta2"})
	var unknown *UnknownFormError
	if !errors.As(err, &unknown) || len(unknown.IDs) != 1 || unknown.IDs[0] != "beta2" || !strings.Contains(err.Error(), "beta22") {
		t.Fatalf("Check = %v, want beta2 unknown, beta22 suggested", err)
	}
}

func TestAccountExplainsARefusedKey(t *testing.T) {
	a := openTestAccount(t, config.Account{Name: "acme"}, true)
	_, err := a.Streams(context.Background())
	if !source.Is(err, source.Auth) {
		t.Fatalf("Streams with a refused key = %v, want the contract's auth kind", err)
	}
	var ke *KeyError
	if !errors.As(a.Explain("acme", err), &ke) || ke.Account != "acme" {
		t.Fatalf("Explain = %v, want a KeyError naming the account", a.Explain("acme", err))
	}
	other := errors.New("disk full")
	if got := a.Explain("acme", other); got != other {
		t.Fatalf("Explain of another failure = %v, want it as it is", got)
	}
}

func TestSourceOpensNoAccountWithoutForms(t *testing.T) {
	cfg := config.Defaults()
	sa, err := Source{}.Open(context.Background(), source.Env{Config: &cfg, Account: config.Account{Name: "bookings-only"}, Log: zap.NewNop()})
	if err != nil || sa != nil {
		t.Fatalf("Open = %v, %v; want nil, nil", sa, err)
	}
}
