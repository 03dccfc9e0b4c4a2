package app

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

// TestReadOnlyStateOpensForEachRead: a missing state reads as empty and is
// not created; a state a writer holds fails the read with an
// *source.UnreadableStateError; a write is refused.
func TestReadOnlyStateOpensForEachRead(t *testing.T) {
	ctx := context.Background()
	cfg := config.Defaults()
	cfg.State.Path = filepath.Join(t.TempDir(), "state.db")
	ro := readOnlyState{cfg: &cfg}
	if v, err := ro.GetSecret(ctx, "x"); v != nil || err != nil {
		t.Fatalf("GetSecret of a missing state = %q, %v; want nothing", v, err)
	}
	if _, err := os.Stat(cfg.State.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read created the state: %v", err)
	}
	w, err := OpenStore(ctx, &cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var unreadable *source.UnreadableStateError
	if _, err := ro.GetSecret(ctx, "x"); !errors.As(err, &unreadable) {
		t.Fatalf("GetSecret of a state a writer holds = %v, want an UnreadableStateError", err)
	}
	if err := ro.PutSecret(ctx, "x", []byte("v")); !errors.Is(err, state.ErrReadOnly) {
		t.Fatalf("PutSecret = %v, want ErrReadOnly", err)
	}
}
