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
	"github.com/syncd-dev/syncd/internal/state"
)

// unopenable is a read-only state that cannot be opened.
type unopenable struct{ state.Store }

func (unopenable) GetSecret(context.Context, string) ([]byte, error) {
	return nil, &source.UnreadableStateError{Err: errors.New("in use by another syncd")}
}

// TestOpenReadOnly: the forms opened to read only list and check the
// account's forms; an id refused matches source.ErrBadID, and a sign-in
// that cannot be read fails the opening.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/forms" {
			http.Error(w, `{"message":"no such form"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"formId":"alpha1","name":"Alpha"},{"formId":"beta22","tags":["u"]}]`))
	}))
	defer srv.Close()
	cfg := config.Defaults()
	cfg.Source.MaxAttempts = 1
	cfg.Forms = []config.FormConfig{{ID: "beta22", Table: "betas"}}
	ac := config.Account{Name: "acme", BaseURL: srv.URL, APIKey: "key", Exclude: []string{"beta22"}}
	a, err := Source{}.OpenReadOnly(ctx, source.Env{Config: &cfg, Account: ac, Log: zap.NewNop()})
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	list, err := a.(source.Inspector).Catalog(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "Alpha" || list[0].Table != "form_alpha1" || list[1].Table != "betas" || list[0].Tags == nil {
		t.Fatalf("Catalog = %+v, %v", list, err)
	}
	_, err = a.(source.Inspector).Describe(ctx, "alpha2")
	var unknown *UnknownFormError
	if !errors.As(err, &unknown) || !errors.Is(err, source.ErrBadID) || !strings.Contains(err.Error(), "alpha1") {
		t.Fatalf("Describe of a typo = %v, want an UnknownFormError naming alpha1, a bad id", err)
	}
	if err := a.(source.Selector).Select(ctx, []string{"beta22"}); !errors.Is(err, source.ErrBadID) {
		t.Fatalf("Select of an excluded form = %v, want a bad id", err)
	}
	if err := a.(source.Selector).Check(ctx, []string{"alpha1"}); err != nil {
		t.Fatalf("Check of a form the account has: %v", err)
	}

	oauth := config.Account{Name: "acme", FormsOAuth: true}
	var signIn *SignInError
	if _, err := (Source{}).OpenReadOnly(ctx, source.Env{Config: &cfg, Account: oauth, Log: zap.NewNop()}); !errors.As(err, &signIn) {
		t.Fatalf("forms_oauth without a state: %v, want a SignInError", err)
	}
	_, err = Source{}.OpenReadOnly(ctx, source.Env{Config: &cfg, Account: oauth, Store: unopenable{}, Log: zap.NewNop()})
	if err == nil || err.Error() != "read the Forms API sign-in of account acme: in use by another syncd" {
		t.Fatalf("forms_oauth, state unreadable: %v", err)
	}
	if a, err := (Source{}).OpenReadOnly(ctx, source.Env{Config: &cfg, Account: config.Account{Name: "none"}, Log: zap.NewNop()}); a != nil || err != nil {
		t.Fatalf("an account without forms: %v, %v", a, err)
	}
}
