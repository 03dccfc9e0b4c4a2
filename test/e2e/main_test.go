// Package e2e runs the real syncd binary against the Forms API simulator over
// loopback and reads its Parquet output back with DuckDB.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/syncd-dev/syncd/internal/testkit"
)

// syncdBin is the binary every test runs, built once by TestMain.
var syncdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "syncd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	syncdBin, err = testkit.BuildSyncd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
