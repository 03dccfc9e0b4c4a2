// Package chaos is the reliability campaign: the real syncd binary against
// the Forms API simulator with every fault knob on, killed with SIGKILL at
// random instants and restarted until each run finishes, with sink faults
// (disk full, read-only output) and damaged state files in between. After
// every round DuckDB reads the output back and the simulator's journal says
// exactly which submissions must and may be there.
//
// `go test ./test/chaos` runs the small CI version; `make chaos` raises the
// sizes with the SYNCD_CHAOS_* variables (see params).
package chaos

import (
	"testing"

	"github.com/syncd-dev/syncd/internal/testkit"
)

// syncdBin is the binary every round runs, built once by TestMain.
var syncdBin string

func TestMain(m *testing.M) { testkit.MainWithSyncd(m, &syncdBin) }
