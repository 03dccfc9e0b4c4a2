package storetest_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			// The same over a sharded state: its default account, which
			// lives in the state object itself, and a named one, which
			// lives in an object of its own (and whose fixture is seeded
			// where the build before sharding kept it: in the state object).
			for _, ns := range []string{"", "acme"} {
				t.Run("sharded/"+cmp.Or(ns, "default"), func(t *testing.T) {
					storetest.Run(t, func(t *testing.T) storetest.Place {
						n++
						return &shardedPlace{objectPlace: objectPlace{url: url(fmt.Sprintf("run%d/syncd-state", n))}, ns: ns}
					})
				})
			}
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

// shardedPlace is one namespace of a sharded state. Its stores claim the
// namespace and name every form and secret in it (ns/key), as the app
// does, and show the suite the keys without it.
type shardedPlace struct {
	objectPlace        // the state object: the default namespace's
	ns          string // "" for the default namespace
}

func (p *shardedPlace) Open(ctx context.Context, o storetest.Options) (state.Store, error) {
	s, err := state.OpenSharded(ctx, state.ShardedOptions{URL: p.url, ReadOnly: o.ReadOnly, Now: o.Now, LeaseTTL: o.LeaseTTL})
	if err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		if err := s.Claim(ctx, p.ns); err != nil {
			s.Close()
			return nil, err
		}
	}
	return &nsStore{s: s, ns: p.ns}, nil
}

// Damage flips the bit in the namespace's own object.
func (p *shardedPlace) Damage(t *testing.T, formID string) {
	t.Helper()
	if p.ns == "" {
		p.objectPlace.Damage(t, formID)
		return
	}
	url := p.url + ".accounts/" + p.ns
	if base, query, ok := strings.Cut(p.url, "?"); ok {
		url = base + ".accounts/" + p.ns + "?" + query
	}
	(&objectPlace{url: url}).Damage(t, p.ns+"/"+formID)
}

// Seed writes the fixture into the state object, its forms and secret
// named in the namespace: a named account's state as the build before
// sharding kept it, which the namespace's first claim moves out.
func (p *shardedPlace) Seed(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(storetest.FixtureObject)
	if err != nil {
		t.Fatal(err)
	}
	if p.ns != "" {
		for _, name := range []string{"form-a", "form-b", "scheduling/refresh_token"} {
			raw = bytes.ReplaceAll(raw, []byte(`"`+name+`"`), []byte(`"`+p.ns+"/"+name+`"`))
		}
		if !json.Valid(raw) {
			t.Fatal("the renamed fixture is not JSON")
		}
	}
	b, key := p.bucket(t)
	defer b.Close()
	if err := b.WriteAll(context.Background(), key, raw, nil); err != nil {
		t.Fatal(err)
	}
}

// nsStore is a Sharded seen from inside one namespace.
type nsStore struct {
	s  *state.Sharded
	ns string
}

func (n *nsStore) key(k string) string {
	if n.ns == "" || k == "" {
		return k
	}
	return n.ns + "/" + k
}

// fix names a damaged form as the suite does.
func (n *nsStore) fix(err error) error {
	var ce *state.CorruptError
	if n.ns != "" && errors.As(err, &ce) {
		ce.Form = strings.TrimPrefix(ce.Form, n.ns+"/")
	}
	return err
}

func (n *nsStore) Lost() <-chan struct{} { return n.s.Lost(n.ns) }

func (n *nsStore) Get(ctx context.Context, id string) (state.StreamState, error) {
	st, err := n.s.Get(ctx, n.key(id))
	if n.ns != "" {
		st.Key = strings.TrimPrefix(st.Key, n.ns+"/")
	}
	return st, n.fix(err)
}

func (n *nsStore) List(ctx context.Context) ([]state.StreamState, error) {
	list, err := n.s.List(ctx)
	for i := range list {
		if n.ns != "" {
			list[i].Key = strings.TrimPrefix(list[i].Key, n.ns+"/")
		}
	}
	return list, err
}

func (n *nsStore) RecordIntent(ctx context.Context, id string, in state.Intent) error {
	return n.fix(n.s.RecordIntent(ctx, n.key(id), in))
}

func (n *nsStore) Commit(ctx context.Context, id string, c state.Commit) error {
	return n.fix(n.s.Commit(ctx, n.key(id), c))
}

func (n *nsStore) DropIntent(ctx context.Context, id, batchID string) error {
	return n.fix(n.s.DropIntent(ctx, n.key(id), batchID))
}

func (n *nsStore) SetSchema(ctx context.Context, id string, schema json.RawMessage) error {
	return n.fix(n.s.SetSchema(ctx, n.key(id), schema))
}

func (n *nsStore) SetError(ctx context.Context, id, msg string) error {
	return n.fix(n.s.SetError(ctx, n.key(id), msg))
}

func (n *nsStore) SetSucceeded(ctx context.Context, id string, t time.Time) error {
	return n.fix(n.s.SetSucceeded(ctx, n.key(id), t))
}

func (n *nsStore) Reset(ctx context.Context, id string) error {
	return n.fix(n.s.Reset(ctx, n.key(id)))
}

func (n *nsStore) Uncommit(ctx context.Context, id string, from time.Time) error {
	return n.fix(n.s.Uncommit(ctx, n.key(id), from))
}

func (n *nsStore) BeginRefresh(ctx context.Context, id string, r state.Refresh) error {
	return n.fix(n.s.BeginRefresh(ctx, n.key(id), r))
}

func (n *nsStore) FinishRefresh(ctx context.Context, id string) error {
	return n.fix(n.s.FinishRefresh(ctx, n.key(id)))
}

func (n *nsStore) Versions(ctx context.Context, id string, from, to time.Time, fn func(state.Entry) error) error {
	return n.fix(n.s.Versions(ctx, n.key(id), from, to, fn))
}

func (n *nsStore) SetReconciled(ctx context.Context, id string, t time.Time) error {
	return n.fix(n.s.SetReconciled(ctx, n.key(id), t))
}

func (n *nsStore) GetSecret(ctx context.Context, name string) ([]byte, error) {
	v, err := n.s.GetSecret(ctx, n.key(name))
	return v, n.fix(err)
}

func (n *nsStore) PutSecret(ctx context.Context, name string, value []byte) error {
	return n.fix(n.s.PutSecret(ctx, n.key(name), value))
}

func (n *nsStore) Close() error { return n.s.Close() }
