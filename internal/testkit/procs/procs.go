// Package procs starts the server processes tests need (the S3 and Azure
// emulators that `make tools` installs into bin/tools). It imports nothing
// of syncd, so any package's tests can use it.
package procs

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// RepoRoot is the repository's top folder, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// ToolsDir is where `make tools` installs the servers the tests start
// (pinned versions: see the Makefile's tools target).
func ToolsDir() string { return filepath.Join(RepoRoot(), "bin", "tools") }

// Tool returns the path of rel under ToolsDir. A missing tool fails the
// test (never skips it) with the one command that installs it.
func Tool(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(ToolsDir(), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (%v): run `make tools` in %s (make test runs it first)", rel, err, RepoRoot())
	}
	return p
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Server is a test server process listening on a loopback port.
type Server struct {
	Addr string // 127.0.0.1:port
	out  *lockedBuffer
}

// Output is what the server printed so far (for failure messages).
func (s *Server) Output() string { return s.out.String() }

// StartServer starts the command that args(addr) builds for a free loopback
// address and waits until ready(addr) holds; it retries on another port when
// the process exits early (a port taken meanwhile). The process is killed at
// cleanup.
func StartServer(t testing.TB, name string, args func(host string, port int) (bin string, argv []string, env []string), ready func(addr string) bool) *Server {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		addr := freeAddr(t)
		host, portStr, _ := net.SplitHostPort(addr)
		var port int
		fmt.Sscan(portStr, &port)
		bin, argv, env := args(host, port)
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, argv...)
		cmd.Env = env
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start %s (%s): %v", name, bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		deadline := time.After(60 * time.Second)
		for {
			if ready(addr) {
				t.Cleanup(func() { cancel(); <-exited })
				return &Server{Addr: addr, out: out}
			}
			select {
			case <-exited:
				lastErr = fmt.Errorf("%s exited: %s", name, out.String())
			case <-deadline:
				lastErr = fmt.Errorf("%s not answering on %s after 60s: %s", name, addr, out.String())
				cancel()
				<-exited
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break
		}
		cancel()
	}
	t.Fatalf("%s did not start: %v", name, lastErr)
	return nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // enough to explain a failure
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
