package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// A stream whose passes fail before it ever committed (here: the API
// refuses its submissions with 400) has a record in the state (its pass
// starts the version index first), and that record carries the error:
// `syncd accounts` exits 1 counting it failing, and `state show` says
// what failed (it said nothing, and accounts exited 0).
func TestStreamFailingFromItsFirstPassIsShown(t *testing.T) {
	t.Setenv("FORMS_API_KEY", testkit.APIKey)
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	var badForm atomic.Value
	badForm.Store("")
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 41, Forms: 2, Submissions: 20, Start: end.AddDate(0, 0, -2), End: end},
		func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if b := badForm.Load().(string); b != "" && strings.HasSuffix(r.URL.Path, "/forms/"+b+"/submissions") {
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusBadRequest)
					fmt.Fprint(rw, `{"message":"bad request"}`)
					return
				}
				h.ServeHTTP(rw, r)
			})
		})
	ids := sim.FormIDs()
	bad := ids[1]
	badForm.Store(bad)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	code, stdout, stderr := run(t, w, "once")
	if code != exitFailed {
		t.Fatalf("once: exit %d, want 1 (form %s fails)\n%s\n%s", code, bad, stdout, stderr)
	}
	code, stdout, _ = run(t, w, "accounts", "-o", "json")
	var accts []struct {
		Failing   int    `json:"failing_streams"`
		LastError string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(stdout), &accts); err != nil || len(accts) != 1 {
		t.Fatalf("accounts -o json: %v\n%s", err, stdout)
	}
	if code != exitFailed || accts[0].Failing != 1 {
		t.Errorf("accounts after a pass where form %s failed: exit %d, failing_streams %d, last_error %q; want exit 1 and 1 failing stream",
			bad, code, accts[0].Failing, accts[0].LastError)
	}
	_, stdout, _ = run(t, w, "state", "show", "-o", "json")
	var view struct {
		Forms []struct {
			FormID    string `json:"form_id"`
			LastError string `json:"last_error"`
		} `json:"forms"`
	}
	if err := json.Unmarshal([]byte(stdout), &view); err != nil {
		t.Fatalf("state show -o json: %v\n%s", err, stdout)
	}
	for _, f := range view.Forms {
		if f.FormID == bad && f.LastError == "" {
			t.Errorf("state show lists form %s (whose pass just failed) with last_error \"\"", bad)
		}
	}
}
