package config

import (
	"strings"
	"testing"
)

func TestBucketURLs(t *testing.T) {
	base := "source:\n  base_url: http://127.0.0.1:1/v1/api\n  api_key: k\n"
	cases := []struct {
		name, yaml, wantErr string
	}{
		{"gcs output", "sink:\n  parquet: {path: gs://lake/forms}\n", ""},
		{"s3 output", "sink:\n  parquet: {path: 's3://lake/forms?region=eu-west-1'}\n", ""},
		{"azure output", "sink:\n  parquet: {path: azblob://lake/forms}\n", ""},
		{"file output", "sink:\n  parquet: {path: 'file:///data/out'}\n", ""},
		{"unknown scheme", "sink:\n  parquet: {path: 'hdfs://x/y'}\n", "sink.parquet.path"},
		{"file without path", "sink:\n  parquet: {path: 'file://'}\n", "sink.parquet.path"},
		{"bucket state", "state:\n  url: gs://lake/syncd/state\n", ""},
		{"bucket state with ttl", "state:\n  url: gs://lake/syncd/state\n  lease_ttl: 10s\n", ""},
		{"s3 state", "state:\n  url: s3://lake/state\n", ""},
		{"azure state", "state:\n  url: azblob://lake/state\n", ""},
		{"file state", "state:\n  url: file:///tmp/state\n", "state.url"},
		{"state names no object", "state:\n  url: gs://lake\n", "state.url"},
		{"lease too short", "state:\n  url: gs://lake/s\n  lease_ttl: 500ms\n", "state.lease_ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(base+tc.yaml), env(nil))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
