package oauth

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/syncd-dev/syncd/internal/schedsim"
)

// TestTokenSourceKeepsAndReportsAnUnsavedRotation: a rotated pair whose
// save fails stays in memory, is saved at the next call without another
// refresh (the stored refresh token is already retired), and each failed
// save is logged at error level, without a token.
func TestTokenSourceKeepsAndReportsAnUnsavedRotation(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 12})
	tok, c := login(t, s.config(t, "sim-client"))
	tok.IssuedAt, tok.Expiry = tok.IssuedAt.Add(-time.Hour), tok.Expiry.Add(-time.Hour) // needs a refresh
	store := newMemStore(s.seq, &tok)
	store.setFailing(true)
	log, logs := observedLogger()
	ts := NewTokenSource(c, store, SourceOptions{Logger: log})
	ctx := context.Background()
	for range 2 {
		if _, err := ts.Token(ctx); err == nil {
			t.Fatal("Token with a failing store: no error")
		}
	}
	if n := s.Stats().Refreshes; n != 1 {
		t.Fatalf("%d refreshes, want 1: the unsaved pair was not kept", n)
	}
	var texts []string
	errorsLogged := 0
	for _, e := range logs.All() {
		texts = append(texts, fmt.Sprint(e.Message, e.ContextMap()))
		if e.Level == zapcore.ErrorLevel && strings.Contains(e.Message, "rotated") && strings.Contains(e.Message, "kept in memory") {
			errorsLogged++
		}
	}
	if errorsLogged != 2 {
		t.Errorf("%d error lines about the unsaved rotated token, want 2: %q", errorsLogged, texts)
	}
	store.setFailing(false)
	got, err := ts.Token(ctx)
	if err != nil {
		t.Fatalf("Token once the store works again: %v", err)
	}
	if n := s.Stats().Refreshes; n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if st := store.stored(); st == nil || st.RefreshToken != got.RefreshToken {
		t.Error("the kept pair was not saved")
	}
	noSecrets(t, s.secretsOf(t, tok, got), texts...)
}
