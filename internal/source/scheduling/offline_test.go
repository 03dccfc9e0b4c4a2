package scheduling

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

// unopenable is a read-only state that cannot be opened.
type unopenable struct{ state.Store }

func (unopenable) GetSecret(context.Context, string) ([]byte, error) {
	return nil, &source.UnreadableStateError{Err: errors.New("in use by another syncd")}
}

// TestOpenReadOnly: the bookings opened to read only are named whatever
// the stored sign-in, and their SignIn says why they cannot be read
// without refreshing it, in the dry run's words.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	cfg := &config.Config{Scheduling: &config.Scheduling{BaseURL: "http://127.0.0.1:1", RateLimit: 10, MaxAttempts: 1,
		Timeout: config.Duration(time.Second), Bookings: config.Bookings{Table: "bookings"}}}
	ac := config.Account{Name: "acme", Scheduling: true}
	store, err := state.OpenBolt(ctx, state.BoltOptions{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	open := func(s state.Store) error {
		t.Helper()
		a, err := Source{}.OpenReadOnly(ctx, source.Env{Config: cfg, Account: ac, Store: s, Log: zap.NewNop()})
		if err != nil {
			t.Fatalf("OpenReadOnly: %v", err)
		}
		streams, err := a.Streams(ctx)
		if err != nil || len(streams) != 1 || streams[0].Table() != "bookings" {
			t.Fatalf("streams %v, %v: want the bookings", streams, err)
		}
		return a.(source.SignIn).SignIn(ctx)
	}
	if err := open(store); err == nil || !strings.HasPrefix(err.Error(), "not signed in: run `syncd auth login`") {
		t.Errorf("no sign-in stored: %v", err)
	}
	if err := open(unopenable{}); err == nil || err.Error() != "not planned: the sign-in cannot be read (in use by another syncd)" {
		t.Errorf("state unreadable: %v", err)
	}
	tokens := StateTokens{Store: store, Namespace: ac.Namespace()}
	now := time.Now()
	if err := tokens.Save(ctx, oauth.Token{AccessToken: "at", RefreshToken: "rt", IssuedAt: now.Add(-2 * time.Hour), Expiry: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := open(store); err == nil || !strings.Contains(err.Error(), "a dry run does not refresh it") {
		t.Errorf("access token expired: %v", err)
	}
	if err := tokens.Save(ctx, oauth.Token{AccessToken: "at", RefreshToken: "rt", IssuedAt: now, Expiry: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := open(store); err != nil {
		t.Errorf("a fresh access token: %v", err)
	}
	if a, err := (Source{}).OpenReadOnly(ctx, source.Env{Config: cfg, Account: config.Account{Name: "other"}, Store: store, Log: zap.NewNop()}); a != nil || err != nil {
		t.Errorf("an account without scheduling: %v, %v", a, err)
	}
}
