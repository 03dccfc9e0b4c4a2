package gcpolicy

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/syncd-dev/syncd/internal/logkey"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.uber.org/zap"
)

// HeapFloor is the heap the collector lets a pass grow to before GOGC 50
// applies, without a memory limit. The 1M-row wide backfill's bound is
// 150 MB RSS, of which the binary's pages and the state file's mapping
// take about 70 MB: at 64 MiB the backfill into BigQuery peaked at 153-157
// MB, at 48 MiB at 142-154 MB (the Go heap at 63 MB instead of 68), for no
// CPU the runs could tell apart (bench/RESULTS.md, 2026-12-06). Under a
// memory limit (a pod's) the threshold is a sixth of it and this floor
// does not apply.
const HeapFloor = 48 << 20

// SetMemoryLimit makes 90% of the container's memory limit (cgroup
// memory.max) the Go runtime's soft limit, so that the collector works
// harder before the kernel kills the pod, and starts the GC policy. GOMEMLIMIT
// set by hand wins, and AUTOMEMLIMIT=off turns the limit off. It returns
// the policy's tuner, nil when GOGC is set by hand.
func SetMemoryLimit(log *zap.Logger) *Tuner {
	limit, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(slog.New(slog.DiscardHandler)))
	switch {
	case err != nil:
		log.Debug("no memory limit from the cgroup", zap.Error(err))
	case limit > 0 && limit < math.MaxInt64:
		log.Debug("soft memory limit from the cgroup", zap.Int64(logkey.Bytes, limit))
	}
	// GOGC 50 keeps a large pass's peak heap near its live size (a 1M-row
	// wide backfill: 166 MB at GOGC 100). From the start, it would also
	// make a small pass, a form of a few thousand submissions as most of
	// a customer's are, collect every few megabytes: a third of its CPU.
	// The policy raises GOGC while the live heap is small, so that the
	// heap may grow to Threshold, and brings it down to 50 as the live
	// heap nears it. GOGC set by hand wins.
	if _, ok := os.LookupEnv("GOGC"); ok {
		return nil
	}
	return Start(Threshold(debug.SetMemoryLimit(-1)), 50, 1000)
}

// Threshold is the heap the collector lets grow before GOGC 50 applies:
// a sixth of the soft memory limit (the cgroup's or GOMEMLIMIT) when there
// is one, and never below HeapFloor. For the default pod's 1 GiB limit
// that is 153 MiB of heap, about 230 MB of memory with the binary and the
// runtime's own: under its 256 MiB request, beyond which a pod is the
// first evicted when its node runs short.
func Threshold(softLimit int64) uint64 {
	if softLimit <= 0 || softLimit == math.MaxInt64 {
		return HeapFloor
	}
	return uint64(max(HeapFloor, softLimit/6))
}
