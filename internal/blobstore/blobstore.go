// Package blobstore opens the bucket a URL names (gs://, s3://, azblob://,
// file://) through gocloud.dev/blob, with each cloud's usual credential
// chain. It knows nothing of syncd's layout: the sink and the state store
// build on it.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://: Azure's default credential chain
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs://: Application Default Credentials, Workload Identity
	_ "gocloud.dev/blob/s3blob"  // s3://: the AWS environment, profile and instance role
	"gocloud.dev/gcerrors"
)

// isScheme reports whether s is a URL scheme a bucket URL may have.
func isScheme(s string) bool {
	switch s {
	case "gs", "s3", "azblob", "file":
		return true
	}
	return false
}

// IsURL reports whether s names a bucket (scheme://...) rather than a local
// path.
func IsURL(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	for _, r := range s[:i] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// Location is a parsed bucket URL: the bucket to open and a key prefix
// inside it.
type Location struct {
	Scheme string
	Bucket string // the URL that opens the bucket, without the prefix
	Prefix string // "" or a key prefix without leading or trailing '/'
	Shown  string // the URL as given, for messages (bucket URLs carry no secrets)
}

// Parse splits a bucket URL into the bucket and the key prefix under it.
// For file:// the whole path is the folder that serves as the bucket.
func Parse(raw string) (Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("bucket URL %q: %w", raw, err)
	}
	if !isScheme(u.Scheme) {
		return Location{}, fmt.Errorf("bucket URL %q: scheme %q is not one of gs, s3, azblob, file", raw, u.Scheme)
	}
	loc := Location{Scheme: u.Scheme, Shown: raw}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("bucket URL %q: a file URL needs an absolute path, file:///abs/path", raw)
		}
		if u.Path == "" || u.Path == "/" {
			return Location{}, fmt.Errorf("bucket URL %q: names no folder", raw)
		}
		q := u.Query()
		// Objects without sidecar .attrs files, temporary files beside
		// their targets (a rename within one file system), folders made.
		for k, v := range map[string]string{"metadata": string(fileblob.MetadataDontWrite), "no_tmp_dir": "1", "create_dir": "1"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
		loc.Bucket = u.String()
		return loc, nil
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("bucket URL %q: names no bucket, e.g. %s://my-bucket/prefix", raw, u.Scheme)
	}
	loc.Prefix = strings.Trim(u.Path, "/")
	if strings.Contains(loc.Prefix, "//") {
		return Location{}, fmt.Errorf("bucket URL %q: the prefix has an empty path element", raw)
	}
	u.Path, u.RawPath = "", ""
	loc.Bucket = u.String()
	return loc, nil
}

// Open opens the bucket of loc. With prefixed set, keys are relative to
// loc.Prefix.
func Open(ctx context.Context, loc Location, prefixed bool) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, loc.Bucket)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", loc.Shown, err)
	}
	if prefixed && loc.Prefix != "" {
		b = blob.PrefixedBucket(b, loc.Prefix+"/")
	}
	return b, nil
}

// IsNotFound reports whether err means the object does not exist.
func IsNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// IsPrecondition reports whether err is a failed write precondition: the
// object changed (or appeared) since it was read.
func IsPrecondition(err error) bool {
	return isPreconditionCode(err) || isConditionConflict(err) || errors.Is(err, ErrChangedAfterWrite)
}

// Hint adds to a bucket error what a user can do about it.
func Hint(err error, key string) error {
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied:
		return fmt.Errorf("%w: give syncd's identity (Workload Identity, Application Default Credentials, the AWS or Azure environment) read and write access to %s", err, key)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: the bucket's service cannot be reached", err)
	}
	return err
}
