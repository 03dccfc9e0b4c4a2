package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Version names one state of an object for compare-and-swap: a GCS
// generation, or an S3 or Azure ETag. "" means the object is absent.
type Version string

// ErrNoConditions means the bucket's store cannot make a write conditional
// (file://, or a driver syncd does not know): compare-and-swap is not
// possible there.
var ErrNoConditions = errors.New("this store has no conditional writes (only gs://, s3:// and azblob:// do)")

// ErrChangedAfterWrite means a conditional write succeeded but the object
// already held something else when it was read back: another writer
// replaced it in between. For IsPrecondition it is a lost race.
var ErrChangedAfterWrite = errors.New("the object was replaced by another writer right after this write")

// IfAbsent is a WriterOptions.BeforeWrite hook that makes an upload create
// the object only if it does not exist yet: DoesNotExist on GCS,
// If-None-Match: * on S3 and Azure. On another store it fails the write
// rather than risk an overwrite, except on file:// (one host, one writer by
// the state's lock), where it does nothing.
func IfAbsent(as func(any) bool) error { return condition(as, "", true) }

// condition makes a write conditional on the object's version ver, or on
// its absence when ver is "".
func condition(as func(any) bool, ver Version, allowFile bool) error {
	var obj **storage.ObjectHandle
	if as(&obj) {
		cond := storage.Conditions{DoesNotExist: true}
		if ver != "" {
			gen, err := strconv.ParseInt(string(ver), 10, 64)
			if err != nil {
				return fmt.Errorf("GCS generation %q is not a number", ver)
			}
			cond = storage.Conditions{GenerationMatch: gen}
		}
		*obj = (*obj).If(cond)
		return nil
	}
	var up *transfermanager.UploadObjectInput
	if as(&up) {
		if ver == "" {
			up.IfNoneMatch = aws.String("*")
		} else {
			up.IfMatch = aws.String(string(ver))
		}
		return nil
	}
	var az *azblob.UploadStreamOptions
	if as(&az) {
		mac := &azblobblob.ModifiedAccessConditions{}
		if ver == "" {
			etagAny := azcore.ETagAny
			mac.IfNoneMatch = &etagAny
		} else {
			e := azcore.ETag(ver)
			mac.IfMatch = &e
		}
		az.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: mac}
		return nil
	}
	if allowFile {
		return nil
	}
	return ErrNoConditions
}

// Read returns the object's bytes and version. An absent object gives an
// error for which IsNotFound holds.
func Read(ctx context.Context, b *blob.Bucket, key string) ([]byte, Version, error) {
	var ver Version
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	var gr *storage.Reader
	var s3out s3.GetObjectOutput
	var azout azblobblob.DownloadStreamResponse
	switch {
	case r.As(&gr):
		ver = Version(strconv.FormatInt(gr.Attrs.Generation, 10))
	case r.As(&s3out):
		ver = Version(aws.ToString(s3out.ETag))
	case r.As(&azout):
		if azout.ETag != nil {
			ver = Version(*azout.ETag)
		}
	default:
		return nil, "", ErrNoConditions
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, "", err
	}
	if ver == "" {
		return nil, "", fmt.Errorf("read %s: the store reported no version of the object", key)
	}
	return raw, ver, nil
}

// WriteIf replaces key with raw if its version is still ver (creates it if
// ver is "" and it is absent), and returns the version written. A changed
// object fails with an error for which IsPrecondition holds.
//
// GCS reports the generation it wrote. S3 and Azure do not pass the new
// ETag through gocloud.dev, so the object is read back: if it holds other
// bytes, another writer replaced it right after this write, and WriteIf
// fails with ErrChangedAfterWrite.
func WriteIf(ctx context.Context, b *blob.Bucket, key string, raw []byte, ver Version, contentType string) (Version, error) {
	var gw *storage.Writer
	isGCS := false
	// Upload, not NewWriter and Write: gocloud.dev v0.47's Azure writer
	// panics in Close when a written upload fails (it nils its pipe
	// reader under a deferred Close), and a failed precondition is exactly
	// such a failure.
	err := b.Upload(ctx, key, bytes.NewReader(raw), &blob.WriterOptions{ContentType: contentType, BeforeWrite: func(as func(any) bool) error {
		if err := condition(as, ver, false); err != nil {
			return err
		}
		isGCS = as(&gw)
		return nil
	}})
	if err != nil {
		return "", err
	}
	if isGCS {
		attrs := gw.Attrs()
		if attrs == nil {
			return "", errors.New("the upload reported no generation")
		}
		return Version(strconv.FormatInt(attrs.Generation, 10)), nil
	}
	got, newVer, err := Read(ctx, b, key)
	if err != nil {
		if IsNotFound(err) {
			return "", ErrChangedAfterWrite
		}
		return "", fmt.Errorf("read back %s: %w", key, err)
	}
	if !bytes.Equal(got, raw) {
		return "", ErrChangedAfterWrite
	}
	return newVer, nil
}

// DeleteIf deletes key if its version is still ver.
func DeleteIf(ctx context.Context, b *blob.Bucket, key string, ver Version) error {
	return b.DeleteWithOptions(ctx, key, &blob.DeleteOptions{BeforeDelete: func(as func(any) bool) error {
		var obj **storage.ObjectHandle
		if as(&obj) {
			gen, err := strconv.ParseInt(string(ver), 10, 64)
			if err != nil {
				return fmt.Errorf("GCS generation %q is not a number", ver)
			}
			*obj = (*obj).If(storage.Conditions{GenerationMatch: gen})
			return nil
		}
		var in *s3.DeleteObjectInput
		if as(&in) {
			in.IfMatch = aws.String(string(ver))
			return nil
		}
		var azo *azblobblob.DeleteOptions
		if as(&azo) {
			e := azcore.ETag(ver)
			azo.AccessConditions = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &e}}
			return nil
		}
		return ErrNoConditions
	}})
}

// isConditionConflict reports an S3 409 ConditionalRequestConflict: a
// concurrent conditional write to the same key, which S3 asks to retry
// after reading the object again. For syncd it is a lost race.
func isConditionConflict(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
}

func isPreconditionCode(err error) bool {
	return gcerrors.Code(err) == gcerrors.FailedPrecondition
}
