package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
)

// TestOutputTableByNameOrFormID: `syncd rows` finds a table by its folder
// name or by a form id (forms[].table, or the default name), and a name
// that is neither says which tables the output has.
func TestOutputTableByNameOrFormID(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"bookings", "orders", "form_vlp2ax", ".hidden"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{}
	cfg.Sink.Type = "parquet"
	cfg.Sink.Parquet.Path = root
	cfg.Forms = []config.FormConfig{{ID: "qQ7zzz", Table: "orders"}}
	for name, want := range map[string]string{"bookings": "bookings", "qQ7zzz": "orders", "vLp2aX": "form_vlp2ax"} {
		got, table, err := OutputTable(cfg, config.Account{}, name)
		if err != nil || got != root || table != want {
			t.Errorf("OutputTable(%s) = %q, %q, %v; want %q, %q", name, got, table, err, root, want)
		}
	}
	_, _, err := OutputTable(cfg, config.Account{}, "nope")
	if err == nil || !strings.Contains(err.Error(), "its tables: bookings, form_vlp2ax, orders") {
		t.Fatalf("OutputTable(nope) = %v", err)
	}
}
