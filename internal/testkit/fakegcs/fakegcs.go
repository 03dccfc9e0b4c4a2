// Package fakegcs runs fake-gcs-server (github.com/fsouza/fake-gcs-server)
// inside the test process: plain HTTP on loopback, objects in memory, GCS
// clients pointed at it through STORAGE_EMULATOR_HOST (the syncd processes
// a test starts reach it over loopback too). Nothing is installed: the
// server is a Go module of this repository. It imports nothing of syncd, so
// any package's tests can use it.
package fakegcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Server is a fake-gcs-server serving plain HTTP on loopback, objects in
// memory. Clients reach it through STORAGE_EMULATOR_HOST=Host.
type Server struct {
	Host string // 127.0.0.1:port
}

// Start starts fake-gcs-server in this process for the test and stops it
// at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake-gcs-server: listen on loopback: %v", err)
	}
	addr := ln.Addr().String()
	port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	fs, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:      "http",
		Host:        "127.0.0.1",
		Port:        uint16(port),
		PublicHost:  addr,
		ExternalURL: "http://" + addr,
		NoListener:  true,
	})
	if err != nil {
		ln.Close()
		t.Fatalf("fake-gcs-server: %v", err)
	}
	hs := &http.Server{Handler: fs.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake-gcs-server on %s: %v", addr, err)
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
	return &Server{Host: addr}
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
		u := fmt.Sprintf("http://%s/storage/v1/b/%s/o?prefix=%s&pageToken=%s", f.Host, bucket, url.QueryEscape(prefix), url.QueryEscape(pageToken))
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
