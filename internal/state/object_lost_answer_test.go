package state

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"

	"github.com/syncd-dev/syncd/internal/testkit/fakegcs"
)

// gcsBucketVia opens bucket acme-lake of fake-gcs-server at host through
// transport rt, which a test uses to lose answers or hang requests.
func gcsBucketVia(t *testing.T, host string, rt http.RoundTripper) *blob.Bucket {
	t.Helper()
	client, err := storage.NewClient(context.Background(), option.WithoutAuthentication(),
		option.WithEndpoint("http://"+host+"/storage/v1/"), option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := gcsblob.OpenBucket(context.Background(), nil, "acme-lake", &gcsblob.Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// lostAnswer, when armed, lets the next upload of the state object land
// but withholds its answer until the caller gives up: a write whose
// outcome the writer cannot know.
type lostAnswer struct {
	name  string
	armed atomic.Bool
}

func (l *lostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	upload := strings.Contains(req.URL.Path, "/upload/") && req.URL.Query().Get("name") == l.name
	if !upload || !l.armed.CompareAndSwap(true, false) {
		return http.DefaultTransport.RoundTrip(req)
	}
	resp, err := http.DefaultTransport.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// A write that landed but whose answer was lost reports an error; the
// store's next write must not take that landed write for its own retried
// one: it goes on from it, so that what it reports durable is in the
// bucket (a rotated refresh token, a committed window and the version
// index objects the state names).
func TestObjectWriteAfterALostAnswer(t *testing.T) {
	f := fakegcs.Start(t)
	f.CreateBucket(t, "acme-lake")
	t.Setenv("STORAGE_EMULATOR_HOST", f.Host)
	ctx := context.Background()
	const key, url = "team/syncd-state", "gs://acme-lake/team/syncd-state"
	rt := &lostAnswer{name: key}
	b := gcsBucketVia(t, f.Host, rt)
	o, err := openObjectIn(ctx, b, key, ObjectOptions{URL: url}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	must(t, o.PutSecret(ctx, "oauth", []byte("refresh-token-v1")))
	must(t, o.Commit(ctx, "b", Commit{Window: win(0), Index: &IndexChange{Put: entries(0, 10, 0)}}))

	inBucket := func() *Object {
		r := newObject(b, key, url, true, nil)
		must(t, r.load(ctx))
		return r
	}
	loseAnswer := func(msg string) {
		t.Helper()
		rt.armed.Store(true)
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if err := o.SetError(cctx, "a", msg); err == nil {
			t.Fatal("a write whose answer was lost reported success")
		}
		if got, _ := inBucket().Get(ctx, "a"); got.LastError != msg {
			t.Fatalf("the write with the lost answer did not land (last error %q): the test lost its premise", got.LastError)
		}
	}

	loseAnswer("boom 1")
	must(t, o.PutSecret(ctx, "oauth", []byte("refresh-token-v2")))
	if got, _ := inBucket().GetSecret(ctx, "oauth"); string(got) != "refresh-token-v2" {
		t.Errorf("PutSecret after a lost answer returned nil, but the bucket holds the secret %q", got)
	}

	loseAnswer("boom 2")
	must(t, o.Commit(ctx, "b", Commit{Window: win(1), Index: &IndexChange{Put: entries(10, 20, 0)}}))
	r := inBucket()
	st, _ := r.Get(ctx, "b")
	if !st.Committed.Covers(win(1)) {
		t.Errorf("Commit after a lost answer returned nil, but the bucket's state does not cover its window")
	}
	n := 0
	if err := r.Versions(ctx, "b", at(-1000), at(100000), func(Entry) error { n++; return nil }); err != nil {
		t.Errorf("the bucket's version index: %v", err)
	}
	if n != 20 {
		t.Errorf("the bucket's version index holds %d entries, want 20", n)
	}
	if got, _ := r.Get(ctx, "a"); got.LastError != "boom 2" {
		t.Errorf("the landed write was lost: form a's last error is %q, want %q", got.LastError, "boom 2")
	}
}

// hangingLease hangs every renewal of the lease while armed, as a
// half-open connection does.
type hangingLease struct {
	armed   atomic.Bool
	release chan struct{}
}

func (h *hangingLease) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.armed.Load() && strings.Contains(req.URL.Path, "/upload/") && strings.HasSuffix(req.URL.Query().Get("name"), ".lease") {
		select {
		case <-h.release:
		case <-req.Context().Done():
		}
		return nil, errors.New("renewal hung")
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A renewal that hangs must not keep the lease alive in this process past
// its expiry: Lost closes when it expires, so that the sinks stop writing
// before another replica takes over.
func TestObjectLeaseLostAtExpiryWhileARenewalHangs(t *testing.T) {
	f := fakegcs.Start(t)
	f.CreateBucket(t, "acme-lake")
	t.Setenv("STORAGE_EMULATOR_HOST", f.Host)
	ctx := context.Background()
	hang := &hangingLease{release: make(chan struct{})}
	defer close(hang.release)
	const key, url, ttl = "team/syncd-state", "gs://acme-lake/team/syncd-state", 900 * time.Millisecond
	a, err := openObjectIn(ctx, gcsBucketVia(t, f.Host, hang), key, ObjectOptions{URL: url, LeaseTTL: ttl}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	must(t, a.SetError(ctx, "f", "x"))
	hang.armed.Store(true) // the next renewal, a third of the TTL on, hangs
	select {
	case <-a.Lost():
	case <-time.After(4 * ttl):
		t.Fatalf("Lost is still open %v after the renewals began to hang (TTL %v)", 4*ttl, ttl)
	}
	if err := a.SetError(ctx, "f", "y"); err == nil {
		t.Error("a write after the lease expired was accepted")
	}
	b, err := openObjectIn(ctx, gcsBucketVia(t, f.Host, http.DefaultTransport), key, ObjectOptions{URL: url, LeaseTTL: ttl}, true)
	if err != nil {
		t.Fatalf("another syncd could not take the expired lease over: %v", err)
	}
	b.Close()
}
