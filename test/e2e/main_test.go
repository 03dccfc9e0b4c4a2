// Package e2e runs the real syncd binary against the Forms API simulator over
// loopback and reads its Parquet output back with DuckDB.
package e2e

import (
	"testing"

	"github.com/syncd-dev/syncd/internal/testkit"
)

// syncdBin is the binary every test runs, built once by TestMain.
var syncdBin string

func TestMain(m *testing.M) { testkit.MainWithSyncd(m, &syncdBin) }
