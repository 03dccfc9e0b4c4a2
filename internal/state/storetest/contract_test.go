package storetest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/state/storetest"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// TestStoreContract runs the contract over every backend: the state file
// and the state object in each bucket store (fake-gcs-server in process,
// versitygw, Azurite; a missing server fails naming `make tools`).
func TestStoreContract(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Place {
			return boltPlace{path: filepath.Join(t.TempDir(), "state", "syncd.db")}
		})
	})
	for _, scheme := range lakes.Schemes {
		t.Run(scheme, func(t *testing.T) {
			var url func(prefix string) string
			if scheme == "gs" {
				// fake-gcs-server with GCS's precondition on a delete (see startGCS).
				base := startGCS(t, lakes.BucketName)
				url = func(prefix string) string { return base + "/" + prefix }
			} else {
				url = lakes.Start(t, scheme).URL
			}
			n := 0
			storetest.Run(t, func(t *testing.T) storetest.Place {
				n++
				return &objectPlace{url: url(fmt.Sprintf("run%d/syncd-state", n))}
			})
		})
	}
}

// boltPlace is a state file.
type boltPlace struct{ path string }

func (p boltPlace) Open(ctx context.Context, o storetest.Options) (state.Store, error) {
	return state.OpenBolt(ctx, state.BoltOptions{Path: p.path, ReadOnly: o.ReadOnly, Now: o.Now})
}

// Damage flips a bit of the record in bucket "forms" (format 3 keeps the
// record's CRC-32C in front of its JSON; the manifest is left alone).
func (p boltPlace) Damage(t *testing.T, formID string) {
	t.Helper()
	db, err := bolt.Open(p.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		forms := tx.Bucket([]byte("forms"))
		val, ok := storetest.FlipRows(forms.Get([]byte(formID)), 0)
		if !ok {
			t.Fatalf("the record of %s has no rows to flip", formID)
		}
		return forms.Put([]byte(formID), val)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (p boltPlace) Seed(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(storetest.FixtureBolt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// objectPlace is a state object.
type objectPlace struct{ url string }

func (p *objectPlace) Open(ctx context.Context, o storetest.Options) (state.Store, error) {
	return state.OpenObject(ctx, state.ObjectOptions{URL: p.url, ReadOnly: o.ReadOnly, Now: o.Now, LeaseTTL: o.LeaseTTL})
}

// bucket opens the state object's bucket; key is the object's.
func (p *objectPlace) bucket(t *testing.T) (*blob.Bucket, string) {
	t.Helper()
	loc, err := blobstore.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	bk, err := blobstore.Open(context.Background(), loc, false)
	if err != nil {
		t.Fatal(err)
	}
	return bk, loc.Prefix
}

// Damage flips a bit in the form's record inside the state object: the
// first "rows" after its "form_id".
func (p *objectPlace) Damage(t *testing.T, formID string) {
	t.Helper()
	b, key := p.bucket(t)
	defer b.Close()
	ctx := context.Background()
	raw, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte(`"form_id":"`+formID+`"`))
	if at < 0 {
		t.Fatalf("the state object holds no record of %s", formID)
	}
	out, ok := storetest.FlipRows(raw, at)
	if !ok {
		t.Fatalf("the record of %s has no rows to flip", formID)
	}
	if err := b.WriteAll(ctx, key, out, nil); err != nil {
		t.Fatal(err)
	}
}

func (p *objectPlace) Seed(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(storetest.FixtureObject)
	if err != nil {
		t.Fatal(err)
	}
	b, key := p.bucket(t)
	defer b.Close()
	if err := b.WriteAll(context.Background(), key, raw, nil); err != nil {
		t.Fatal(err)
	}
}
