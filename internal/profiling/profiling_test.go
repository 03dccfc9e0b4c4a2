package profiling

import (
	"strings"
	"testing"
)

func TestCheckPprofAddr(t *testing.T) {
	tests := []struct {
		addr    string
		anyHost bool
		err     string // "" when accepted
	}{
		{"127.0.0.1:6060", false, ""},
		{"localhost:6060", false, ""},
		{"[::1]:6060", false, ""},
		{"0.0.0.0:6060", false, "--pprof-any-host"},
		{":6060", false, "--pprof-any-host"},
		{"10.1.2.3:6060", false, "beyond this host"},
		{"0.0.0.0:6060", true, ""},
		{"6060", false, "HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := CheckAddr(tt.addr, tt.anyHost)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error saying %q", err, tt.err)
			}
		})
	}
}
