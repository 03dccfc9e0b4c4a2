// Package fakegcs starts fake-gcs-server (github.com/fsouza/fake-gcs-server)
// for tests: plain HTTP on loopback, objects in memory, GCS clients pointed
// at it through STORAGE_EMULATOR_HOST. It imports nothing of syncd, so any
// package's tests can use it.
package fakegcs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Binary is the fake-gcs-server command the bucket tests start;
// .ci/run installs it with go install.
const Binary = "fake-gcs-server"

// Server is a fake-gcs-server serving plain HTTP on loopback, objects in
// memory. Clients reach it through STORAGE_EMULATOR_HOST=Host.
type Server struct {
	Host string // 127.0.0.1:port
}

// Start starts fake-gcs-server for the test and stops it at
// cleanup. Without the binary the test fails in CI (CI=true) and is
// skipped elsewhere, saying how to install it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		if gopath, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			cand := filepath.Join(strings.TrimSpace(string(gopath)), "bin", Binary)
			if _, serr := os.Stat(cand); serr == nil {
				bin, err = cand, nil
			}
		}
	}
	if err != nil {
		msg := "fake-gcs-server is not on PATH nor in $(go env GOPATH)/bin: install it with `go install github.com/fsouza/fake-gcs-server@v1.56.1` (.ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		addr := freeAddr(t)
		port := addr[strings.LastIndex(addr, ":")+1:]
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", port, "-public-host", addr, "-external-url", "http://"+addr, "-log-level", "error")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		f := &Server{Host: addr}
		if lastErr = f.waitReady(exited); lastErr == nil {
			t.Cleanup(func() { cancel(); <-exited })
			return f
		}
		cancel()
		<-exited
		lastErr = fmt.Errorf("%w: %s", lastErr, out.String())
	}
	t.Fatalf("fake-gcs-server did not start: %v", lastErr)
	return nil
}

func (f *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.After(20 * time.Second)
	for {
		resp, err := http.Get("http://" + f.Host + "/storage/v1/b")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("fake-gcs-server exited")
		case <-deadline:
			return fmt.Errorf("fake-gcs-server not answering on %s: %v", f.Host, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Env is the environment entry that points GCS clients at the fake.
func (f *Server) Env() string { return "STORAGE_EMULATOR_HOST=" + f.Host }

// CreateBucket makes a bucket.
func (f *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name})
	resp, err := http.Post("http://"+f.Host+"/storage/v1/b?project=test", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create bucket %s: %s: %s", name, resp.Status, b)
	}
}

// Download copies every object under prefix in bucket into dir, keeping
// their keys as relative paths (DuckDB cannot read gs:// from the fake).
func (f *Server) Download(t testing.TB, bucket, prefix, dir string) int {
	t.Helper()
	n := 0
	pageToken := ""
	for {
		u := fmt.Sprintf("http://%s/storage/v1/b/%s/o?prefix=%s&pageToken=%s", f.Host, bucket, prefix, pageToken)
		var list struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		getJSON(t, u, &list)
		for _, it := range list.Items {
			rel := strings.TrimPrefix(strings.TrimPrefix(it.Name, prefix), "/")
			dst := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, f.Object(t, bucket, it.Name), 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if list.NextPageToken == "" {
			return n
		}
		pageToken = list.NextPageToken
	}
}

// Object returns an object's bytes.
func (f *Server) Object(t testing.TB, bucket, name string) []byte {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/download/storage/v1/b/%s/o/%s?alt=media", f.Host, bucket, url.PathEscape(name)))
	if err != nil {
		t.Fatalf("download %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("download %s: %v %s", name, err, resp.Status)
	}
	return b
}

func getJSON(t testing.TB, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", u, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
