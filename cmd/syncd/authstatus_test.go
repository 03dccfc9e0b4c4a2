package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestAuthStatusOfAnAccountThatDoesNotSignIn: `syncd auth status --account
// NAME` for an account without `scheduling: true` refuses, as `auth logout`
// does, with "account NAME does not sign in to the scheduling API" (exit 2).
// It used to print nothing and exit 0, which read as "fine".
func TestAuthStatusOfAnAccountThatDoesNotSignIn(t *testing.T) {
	sim, _ := mistakeSim(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	cfg := fmt.Sprintf("source: {base_url: %s, rate_limit: 200, max_attempts: 8, timeout: 10s}\n"+
		"scheduling: {base_url: http://127.0.0.1:9, client_id: cid, client_secret: cs-0123456789}\n"+
		"accounts:\n  - {name: acme, api_key: \"${FORMS_API_KEY}\", scheduling: true}\n  - {name: initech, api_key: \"${FORMS_API_KEY}\"}\n"+
		"sync: {safety_lag: 0s}\nsink: {type: parquet, parquet: {path: %s}}\nstate: {path: %s}\nlog: {level: info, format: json}\n",
		sim.BaseURL, w.Out, w.State)
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, w, "auth", "status", "--account", "initech")
	t.Logf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	if code == 0 {
		t.Errorf("auth status --account initech (no scheduling: true) exited 0 with stdout %q: nothing was checked", strings.TrimSpace(stdout))
	}
	lcode, _, lerr := run(t, w, "auth", "logout", "--account", "initech", "--yes")
	t.Logf("auth logout for the same account: exit %d, stderr %q", lcode, lerr)
}
