// Package s3srv starts an S3 server for tests: Versity's S3 gateway
// (versitygw) over a temporary folder, plain HTTP on loopback. It enforces
// S3's conditional writes (If-None-Match: * and If-Match on PutObject),
// which the sink and the state store rely on; gofakes3 ignores them.
// `make tools` installs it into bin/tools.
package s3srv

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/syncd-dev/syncd/internal/testkit/procs"
)

// Test credentials of the server: not secrets.
const (
	AccessKey = "syncd-test-access"
	SecretKey = "syncd-test-secret-not-a-secret"
	Region    = "us-east-1"
)

// Server is a running S3 server.
type Server struct {
	*procs.Server
	Endpoint string // http://127.0.0.1:port
}

// Start starts versitygw for the test; it stops at cleanup. Without
// bin/tools/versitygw the test fails, naming `make tools`.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := procs.Tool(t, "versitygw")
	root := t.TempDir()
	data, meta := filepath.Join(root, "data"), filepath.Join(root, "meta")
	for _, d := range []string{data, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := procs.StartServer(t, "versitygw", func(host string, port int) (string, []string, []string) {
		return bin, []string{"--access", AccessKey, "--secret", SecretKey, "--region", Region, "--port", host + ":" + strconv.Itoa(port), "posix", "--sidecar", meta, data}, os.Environ()
	}, func(addr string) bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return &Server{Server: srv, Endpoint: "http://" + srv.Addr}
}

// Env are the environment entries that give S3 clients the server's
// credentials; the endpoint goes in the bucket URL (see URL).
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
}

// Setenv sets Env in this process for the test.
func (s *Server) Setenv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := cut(kv)
		t.Setenv(k, v)
	}
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// URL is the s3:// URL of prefix (may be "") in bucket on this server.
func (s *Server) URL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {Region}, "disable_https": {"true"}}
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?" + q.Encode()
}

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	c := s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v\n%s", name, s.Endpoint, err, s.Output())
	}
}

// String names the server in messages.
func (s *Server) String() string { return fmt.Sprintf("versitygw on %s", s.Addr) }
