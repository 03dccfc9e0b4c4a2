package blobsink

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// TestLazyUpload: a file up to smallUpload is gathered and sent with a
// buffer of its size; a larger one streams with the driver's default
// buffer; either way the object holds exactly the bytes written.
func TestLazyUpload(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	for _, tc := range []struct {
		size       int
		wantBuffer int
	}{
		{0, 256 << 10},
		{3_000, 256 << 10},
		{256 << 10, 256 << 10},
		{256<<10 + 1, 512 << 10},
		{smallUpload, smallUpload},
		{smallUpload + 1, 0},
		{3 * smallUpload, 0},
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			key := fmt.Sprintf("f%d", tc.size)
			opened, gotBuffer := 0, -1
			up := &lazyUpload{open: func(bufferSize int) (*blob.Writer, error) {
				opened++
				gotBuffer = bufferSize
				return bucket.NewWriter(ctx, key, &blob.WriterOptions{BufferSize: bufferSize})
			}}
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(i * 7)
			}
			for rest := want; len(rest) > 0; { // as an encoder writes: pieces of many sizes
				n := min(len(rest), 1+len(rest)%100_003)
				if k, err := up.Write(rest[:n]); err != nil || k != n {
					t.Fatalf("write %d bytes: wrote %d, %v", n, k, err)
				}
				rest = rest[n:]
			}
			w, err := up.finish()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if opened != 1 || gotBuffer != tc.wantBuffer {
				t.Errorf("opened %d uploads, the last with buffer %d; want 1 with %d", opened, gotBuffer, tc.wantBuffer)
			}
			got, err := bucket.ReadAll(ctx, key)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("read back %d bytes (%v), want the %d written", len(got), err, len(want))
			}
		})
	}
}
