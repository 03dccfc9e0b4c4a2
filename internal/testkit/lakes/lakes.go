// Package lakes gives tests a bucket on a local server of each object
// store syncd writes to: fake-gcs-server in process for gs://, versitygw
// for s3://, Azurite for azblob://. Each enforces its store's conditional
// writes. The servers' credentials are set in this process's environment
// for the test (t.Setenv), and Env gives them to the syncd processes a test
// starts.
package lakes

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/testkit/azurite"
	"github.com/syncd-dev/syncd/internal/testkit/fakegcs"
	"github.com/syncd-dev/syncd/internal/testkit/s3srv"
)

// Schemes are the bucket stores every bucket test runs against.
var Schemes = []string{"gs", "s3", "azblob"}

// BucketName is the bucket (container) each lake creates.
const BucketName = "acme-lake"

// Lake is one bucket on a local server.
type Lake struct {
	Scheme string
	env    []string
	url    func(prefix string) string
}

// Start starts the server of scheme, creates BucketName on it and points
// this process at it for the test.
func Start(t testing.TB, scheme string) *Lake {
	t.Helper()
	l := &Lake{Scheme: scheme}
	switch scheme {
	case "gs":
		f := fakegcs.Start(t)
		f.CreateBucket(t, BucketName)
		l.env = []string{f.Env()}
		l.url = func(p string) string { return join("gs://"+BucketName, p, "") }
	case "s3":
		s := s3srv.Start(t)
		s.CreateBucket(t, BucketName)
		l.env = s.Env()
		l.url = func(p string) string { return s.URL(BucketName, p) }
	case "azblob":
		a := azurite.Start(t)
		a.CreateContainer(t, BucketName)
		l.env = a.Env()
		l.url = func(p string) string { return a.URL(BucketName, p) }
	default:
		t.Fatalf("lakes: no local server for scheme %q", scheme)
	}
	for _, kv := range l.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return l
}

func join(base, prefix, query string) string {
	if prefix != "" {
		base += "/" + strings.Trim(prefix, "/")
	}
	return base + query
}

// URL is the bucket URL of prefix ("" for the bucket itself).
func (l *Lake) URL(prefix string) string { return l.url(prefix) }

// Env are the environment entries a syncd process needs to reach the lake.
func (l *Lake) Env() []string { return append([]string(nil), l.env...) }

// Open opens the whole bucket in this process; it is closed at cleanup.
func (l *Lake) Open(t testing.TB) *blob.Bucket {
	t.Helper()
	loc, err := blobstore.Parse(l.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := blobstore.Open(context.Background(), loc, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Keys lists the keys under prefix.
func (l *Lake) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	b := l.Open(t)
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: strings.TrimSuffix(prefix, "/") + "/"})
	for {
		obj, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatalf("list %s in %s: %v", prefix, l.Scheme, err)
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
}

// Download copies every object under prefix into dir, keys as relative
// paths (DuckDB then reads them as files), and returns how many.
func (l *Lake) Download(t testing.TB, prefix, dir string) int {
	t.Helper()
	b := l.Open(t)
	keys := l.Keys(t, prefix)
	for _, k := range keys {
		raw, err := b.ReadAll(context.Background(), k)
		if err != nil {
			t.Fatalf("download %s: %v", k, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(k, strings.TrimSuffix(prefix, "/")), "/")
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return len(keys)
}
