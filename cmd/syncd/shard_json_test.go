package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// A pass or backfill of a shard that no account hashes to has nothing to
// do: exit 0, and under -o json a stdout that is JSON alone (an empty list
// of streams), the note on stderr.
func TestEmptyShardUnderJSONIsJSON(t *testing.T) {
	sim, start := mistakeSim(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	// Shards share a state in a bucket.
	lake := lakes.Start(t, "gs")
	cfg := fmt.Sprintf("source: {base_url: %s, rate_limit: 200, max_attempts: 8, timeout: 10s}\n"+
		"accounts:\n  - {name: acme, api_key: \"${FORMS_API_KEY}\"}\n"+
		"sync: {safety_lag: 0s}\nsink: {type: parquet, parquet: {path: %s}}\nstate: {url: %q}\nlog: {level: info, format: json}\n",
		sim.BaseURL, w.Out, lake.URL("team/syncd-state"))
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// One account among many shards: most shards hold none of it.
	empty := ""
	for i := range 8 {
		code, stdout, _ := run(t, w, "once", "--shard", fmt.Sprintf("%d/8", i))
		if code == 0 && strings.Contains(stdout, "no account hashes") {
			empty = fmt.Sprintf("%d/8", i)
			break
		}
	}
	if empty == "" {
		t.Fatal("no shard of 8 was empty: the test lost its premise")
	}
	for _, args := range [][]string{
		{"once", "--shard", empty, "-o", "json"},
		{"backfill", "--shard", empty, "--from", start.Format("2006-01-02"), "-o", "json"},
	} {
		code, stdout, stderr := run(t, w, args...)
		var entries []map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &entries) != nil || len(entries) != 0 || !strings.Contains(stderr, "no account hashes") {
			t.Errorf("%v: exit %d, stdout %q (want [] alone), stderr %q", args, code, stdout, stderr)
		}
	}
}
