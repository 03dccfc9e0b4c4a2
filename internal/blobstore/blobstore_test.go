package blobstore

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		raw, bucket, prefix, err string
	}{
		{raw: "gs://lake/forms/v1", bucket: "gs://lake", prefix: "forms/v1"},
		{raw: "gs://lake", bucket: "gs://lake", prefix: ""},
		{raw: "gs://lake/forms/", bucket: "gs://lake", prefix: "forms"},
		{raw: "s3://lake/forms?region=eu-west-1", bucket: "s3://lake?region=eu-west-1", prefix: "forms"},
		{raw: "azblob://container/p", bucket: "azblob://container", prefix: "p"},
		{raw: "file:///data/out", bucket: "file:///data/out?create_dir=1&metadata=skip&no_tmp_dir=1", prefix: ""},
		{raw: "file://host/data", err: "absolute path"},
		{raw: "file:///", err: "names no folder"},
		{raw: "gs:///forms", err: "names no bucket"},
		{raw: "gs://lake/a//b", err: "empty path element"},
		{raw: "ftp://x/y", err: "not one of"},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			loc, err := Parse(tc.raw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if loc.Bucket != tc.bucket || loc.Prefix != tc.prefix {
				t.Fatalf("bucket %q prefix %q, want %q %q", loc.Bucket, loc.Prefix, tc.bucket, tc.prefix)
			}
		})
	}
}

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{
		"gs://b/p": true, "file:///x": true, "s3://b": true,
		"./out": false, "/var/lib/syncd/out": false, "C:\\\\out": false, "a b://x": false,
	} {
		if got := IsURL(s); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", s, got, want)
		}
	}
}
