package sinktest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/blobsink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
)

// lateProxy stands between a writer and Azurite and holds the first
// request that would make an object visible (Put Blob, Put Block List)
// once it has arrived whole, until release is closed; then it forwards it,
// whether or not its sender is still alive, as a service's front end that
// received a request completes it. That is the instant a SIGKILL can fall
// into: the writer sent its commit and died before the answer.
type lateProxy struct {
	held    chan struct{} // closed once the commit request is held
	release chan struct{} // close to forward it
	done    chan int      // its status from Azurite
}

// isCommit tells the request that makes an object visible: Azure's Put
// Blob or Put Block List, S3's PutObject or CompleteMultipartUpload.
func isCommit(r *http.Request) bool {
	q := r.URL.Query()
	switch {
	case r.Header.Get("x-ms-version") != "": // Azure
		return r.Method == http.MethodPut && (q.Get("comp") == "blocklist" || q.Get("comp") == "" && r.Header.Get("x-ms-blob-type") != "")
	case r.Method == http.MethodPut: // S3: a part upload names its part
		return !q.Has("partNumber") && !q.Has("uploadId") && r.URL.Path != "/" && strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0
	case r.Method == http.MethodPost:
		return q.Has("uploadId")
	}
	return false
}

func startLateProxy(t *testing.T, target string) (*lateProxy, string) {
	t.Helper()
	p := &lateProxy{held: make(chan struct{}), release: make(chan struct{}), done: make(chan int, 1)}
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var holding atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isCommit(r) || !holding.CompareAndSwap(false, true) {
			rp.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("late proxy: read the commit request: %v", err)
			return
		}
		close(p.held)
		<-p.release
		out, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("late proxy: %v", err)
			return
		}
		out.Header = r.Header.Clone()
		out.Host = r.Host // S3 signs it
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			// A service that refuses a conditional upload may answer and
			// close before it reads the body (versitygw does): the client
			// then sees a broken pipe, not the status. Whether the upload
			// landed is then told by the object itself (the caller checks
			// its attempt).
			t.Logf("late proxy: forward the held commit: %v", err)
			p.done <- noAnswer
			return
		}
		resp.Body.Close()
		p.done <- resp.StatusCode
	}))
	t.Cleanup(srv.Close)
	return p, strings.TrimPrefix(srv.URL, "http://")
}

// noAnswer is what the late proxy reports when the forwarded commit got no
// status back.
const noAnswer = -1

// testLateCommit: a writer SIGKILLed after sending its commit request, the
// request completed by the service only after a restarted writer has
// checked Committed (no) and committed the batch again as a redo (a new
// attempt that rewrites). Every upload is conditional on what its writer
// saw: absence (a first attempt) or the version in place (a redo). The
// dead writer's commit then names a state that is gone, and is refused:
// the batch's object stays the restarted attempt's, which the state
// records. (A redo that rewrote unconditionally, as before, let the dead
// redo's commit land over it: the output then held rows the state did not
// record, and Committed of the recorded attempt said no.)
// urls makes a fresh bucket for case i and returns its URL through a
// proxy to the service at addr, and its URL straight to the service.
func testLateCommit(t *testing.T, addr string, urls func(t *testing.T, i int, proxy string) (viaProxy, direct string)) {
	cases := []struct {
		name        string
		killedRedo  bool
		wantAttempt string // whose object the batch ends with
		landed      bool   // the held commit succeeds (else its condition refuses it)
	}{
		{"killed first attempt", false, "restarted", false},
		{"killed redo", true, "restarted", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proxy, proxyAddr := startLateProxy(t, addr)
			viaProxy, direct := urls(t, i, proxyAddr)
			s, err := blobsink.New(context.Background(), blobsink.Options{URL: direct, Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			killed := killedBatch()
			if tc.killedRedo {
				// The redo rewrites the file an earlier, stopped attempt
				// left.
				first := killed
				first.Attempt = "first"
				rec := sinktest.Record(first.ID, false, sinktest.Sub{Key: "first", Time: sinktest.Day, Version: sinktest.Day})
				err := sink.CommitRecord(ctx, s, first, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}

			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), childURL+"="+viaProxy, childChunks+"=2", childAttempt+"=killed")
			if tc.killedRedo {
				cmd.Env = append(cmd.Env, childReplace+"=1")
			}
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-proxy.held:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatal("the child never sent its commit")
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			// The restarted writer: the batch is not committed, so it is
			// fetched again and rewritten (Replace), as the poller's redo.
			mustCommittedAs(t, s, killed, false)
			redo := killed
			redo.Attempt, redo.Replace = "restarted", true
			rec := sinktest.Record(redo.ID, false, sinktest.Sub{Key: "redo", Time: sinktest.Day, Version: sinktest.Day})
			defer rec.Release()
			if err := sink.CommitRecord(ctx, s, redo, rec); err != nil {
				t.Fatal(err)
			}
			mustCommittedAs(t, s, redo, true)

			close(proxy.release)
			// Azure refuses If-None-Match: * on an existing blob with 409
			// BlobAlreadyExists, a failed If-Match with 412.
			got := <-proxy.done
			switch landed := got/100 == 2; {
			case got == noAnswer && !tc.landed:
				t.Logf("the service closed the connection before it answered the dead writer's commit: the object's attempt below says it did not land")
			case landed != tc.landed || !landed && got != http.StatusConflict && got != http.StatusPreconditionFailed:
				t.Errorf("the dead writer's commit answered %d; want it to land: %v", got, tc.landed)
			}
			a, err := s.Bucket().Attributes(ctx, s.Key(redo, redo.Parts[0]))
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Metadata[blobsink.MetaAttempt]; got != tc.wantAttempt {
				t.Errorf("the batch's object is attempt %q's, want %q's", got, tc.wantAttempt)
			}
			mustCommittedAs(t, s, redo, tc.wantAttempt == "restarted")
		})
	}
}

func mustCommittedAs(t *testing.T, s sink.Sink, b sink.Batch, want bool) {
	t.Helper()
	got, err := s.Committed(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Committed(%s, attempt %s) = %v, want %v", b.ID, b.Attempt, got, want)
	}
}
