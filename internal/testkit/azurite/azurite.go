// Package azurite starts Azurite, Microsoft's Azure Storage emulator, for
// tests: its Blob service on loopback, in memory. It enforces Azure's
// conditional writes (If-None-Match: *, If-Match). `make tools` installs it
// into bin/tools with npm.
package azurite

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/syncd-dev/syncd/internal/testkit/procs"
)

// Azurite's well-known development account: not a secret.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running Azurite Blob service.
type Server struct {
	*procs.Server
}

// Start starts Azurite for the test; it stops at cleanup. Without
// bin/tools/node_modules/.bin/azurite-blob the test fails, naming
// `make tools`.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := procs.Tool(t, "node_modules/.bin/azurite-blob")
	srv := procs.StartServer(t, "azurite", func(host string, port int) (string, []string, []string) {
		return bin, []string{"--blobHost", host, "--blobPort", strconv.Itoa(port), "--inMemoryPersistence", "--silent", "--skipApiVersionCheck", "--loose", "--disableProductStyleUrl"}, os.Environ()
	}, func(addr string) bool {
		resp, err := http.Get("http://" + addr + "/" + Account + "?comp=list")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return &Server{Server: srv}
}

// Env are the environment entries that give Azure clients the account.
func (s *Server) Env() []string {
	return []string{"AZURE_STORAGE_ACCOUNT=" + Account, "AZURE_STORAGE_KEY=" + Key}
}

// Setenv sets Env in this process for the test.
func (s *Server) Setenv(t testing.TB) {
	t.Helper()
	t.Setenv("AZURE_STORAGE_ACCOUNT", Account)
	t.Setenv("AZURE_STORAGE_KEY", Key)
}

// URL is the azblob:// URL of prefix (may be "") in container.
func (s *Server) URL(container, prefix string) string {
	q := url.Values{"localemu": {"true"}, "domain": {s.Addr}, "protocol": {"http"}}
	u := "azblob://" + container
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?" + q.Encode()
}

// CreateContainer makes a container.
func (s *Server) CreateContainer(t testing.TB, name string) {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(Account, Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential("http://"+s.Addr+"/"+Account, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateContainer(context.Background(), name, nil); err != nil {
		t.Fatalf("create container %s on azurite %s: %v\n%s", name, s.Addr, err, s.Output())
	}
}
