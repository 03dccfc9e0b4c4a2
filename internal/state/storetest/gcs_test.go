package storetest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// startGCS starts fake-gcs-server in process, as testkit/fakegcs does, but
// behind a handler that keeps GCS's precondition on a delete: fake-gcs-server
// v1.56.1 ignores ifGenerationMatch on DELETE (its deleteObject reads only
// "generation"), so a stale lease holder's conditional release would
// delete the new holder's lease there, and never on GCS. It points this
// process at the server for the test and returns the bucket's gs:// URL.
func startGCS(t *testing.T, bucket string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	fs, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Port: uint16(port), PublicHost: addr, ExternalURL: "http://" + addr, NoListener: true,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	fs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	inner := fs.HTTPHandler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const prefix = "/storage/v1/b/" // then {bucket}/o/{object}
		if want := r.URL.Query().Get("ifGenerationMatch"); r.Method == http.MethodDelete && want != "" && strings.HasPrefix(r.URL.Path, prefix) {
			rest := strings.TrimPrefix(r.URL.EscapedPath(), prefix)
			b, obj, ok := strings.Cut(rest, "/o/")
			if ok {
				name, _ := url.PathUnescape(obj)
				cur, err := fs.GetObject(b, name)
				if err == nil && strconv.FormatInt(cur.Generation, 10) != want {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusPreconditionFailed)
					w.Write([]byte(`{"error":{"code":412,"message":"conditionNotMet"}}`))
					return
				}
			}
		}
		inner.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake-gcs-server: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close()
		}
		<-served
		fs.Stop()
	})
	t.Setenv("STORAGE_EMULATOR_HOST", addr)
	return "gs://" + bucket
}
