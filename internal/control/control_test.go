package control

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
)

// TestControlRefusesWithoutToken: a control request without the token,
// with another, or not POST, never reaches the handler.
func TestControlRefusesWithoutToken(t *testing.T) {
	const token = "0123456789abcdef"
	tests := []struct {
		name, method, auth string
		want               int
	}{
		{"no header", http.MethodPost, "", http.StatusUnauthorized},
		{"wrong token", http.MethodPost, "Bearer fedcba9876543210", http.StatusUnauthorized},
		{"token with a suffix", http.MethodPost, "Bearer " + token + "0", http.StatusUnauthorized},
		{"token without Bearer", http.MethodPost, token, http.StatusUnauthorized},
		{"basic scheme", http.MethodPost, "Basic " + token, http.StatusUnauthorized},
		{"empty bearer", http.MethodPost, "Bearer ", http.StatusUnauthorized},
		{"right token, GET", http.MethodGet, "Bearer " + token, http.StatusMethodNotAllowed},
		{"right token", http.MethodPost, "Bearer " + token, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := false
			h := requireToken(token, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
			req := httptest.NewRequest(tt.method, pathBackfill, strings.NewReader(`{}`))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d", rec.Code, tt.want)
			}
			if reached != (tt.want == http.StatusOK) {
				t.Errorf("handler reached = %v, want %v", reached, tt.want == http.StatusOK)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Error("the refusal repeats the token")
			}
		})
	}
}

// TestControlFile: written with mode 0600, read back, beside the state file
// (or in the temporary directory for a state in a bucket).
func TestControlFile(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{}
	cfg.State.Path = filepath.Join(dir, "syncd.db")
	p := Path(cfg)
	if p != cfg.State.Path+".control" {
		t.Fatalf("control path %s, want beside the state", p)
	}
	if _, err := Read(cfg); err == nil {
		t.Fatal("read a control file that is not there")
	}
	if err := writePrivate(p, []byte(`{"addr":"127.0.0.1:1","token":"t","pid":1}`)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	ci, err := Read(cfg)
	if err != nil || ci.Addr != "127.0.0.1:1" || ci.Token != "t" {
		t.Fatalf("Read = %+v, %v", ci, err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(cfg); err == nil || !strings.Contains(err.Error(), "not to be trusted") {
		t.Errorf("a control file others may read: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(`{"addr":""}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(cfg); err == nil || !strings.Contains(err.Error(), "restart the daemon") {
		t.Errorf("a control file without address: %v", err)
	}
	bucket := &config.Config{}
	bucket.State.URL = "s3://bucket/state"
	if got := Path(bucket); filepath.Dir(got) != filepath.Clean(os.TempDir()) || !strings.HasSuffix(got, ".control") {
		t.Errorf("control path of a bucket state = %s", got)
	}
}
