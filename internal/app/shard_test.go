package app

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "JOB_COMPLETION_INDEX" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		in, env string
		want    Shard
		err     string
	}{
		{"0/3", "", Shard{0, 3}, ""},
		{"2/3", "", Shard{2, 3}, ""},
		{"/4", "3", Shard{3, 4}, ""},
		{"/4", "", Shard{}, "JOB_COMPLETION_INDEX, which is not set"},
		{"3/3", "", Shard{}, "from 0 to 2"},
		{"/4", "4", Shard{}, "from 0 to 3"},
		{"1/0", "", Shard{}, "at least 1"},
		{"2", "", Shard{}, "write it I/N"},
		{"a/2", "", Shard{}, "from 0 to 1"},
	} {
		got, err := ParseShard(tc.in, env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShard(%q, env %q) = %v, %v; want an error with %q", tc.in, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q, env %q) = %v, %v; want %v", tc.in, tc.env, got, err, tc.want)
		}
	}
}

// TestShardsPartitionAccounts: every account belongs to exactly one shard
// of N, and the shards are near even.
func TestShardsPartitionAccounts(t *testing.T) {
	const accounts, n = 200, 4
	counts := make([]int, n)
	for a := range accounts {
		name := fmt.Sprintf("acct-%03d", a)
		owners := 0
		for i := range n {
			if (Shard{i, n}).Owns(name) {
				owners++
				counts[i]++
			}
		}
		if owners != 1 {
			t.Fatalf("account %s is in %d shards", name, owners)
		}
	}
	for i, c := range counts {
		if c < accounts/n/2 || c > accounts/n*2 {
			t.Errorf("shard %d has %d of %d accounts: %v", i, c, accounts, counts)
		}
	}
}
