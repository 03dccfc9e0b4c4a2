// Package gcpolicy lets the heap grow to a threshold before the collector
// works harder: after each collection it sets GOGC so that the next
// collection starts when the heap reaches the threshold, or at the least
// GOGC allowed once the live heap nears it.
//
// It reads the live heap the collector just marked (runtime/metrics'
// /gc/heap/live:bytes), the figure the runtime computes its next goal from,
// so the heap is next collected at the threshold. bytedance/gopkg's
// gctuner, used before, reads HeapInuse through runtime.ReadMemStats (which
// stops the world), and HeapInuse also counts spans of garbage not yet
// swept: it read up to twice a backfill's live heap, and collected it at
// 50-60 MB under a 64 MiB threshold, 30% more often than needed
// (bench/RESULTS.md, 2026-11-26).
package gcpolicy

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

const liveMetric = "/gc/heap/live:bytes"

// Tuner sets GOGC after each collection.
type Tuner struct {
	threshold              uint64
	minPercent, maxPercent int
	percent                atomic.Int64 // the GOGC set last
	stopped                atomic.Bool
	sample                 []metrics.Sample // used by one finalizer at a time
}

// Start tunes GOGC between minPercent and maxPercent after every
// collection from now on, and once now. Stop ends it.
func Start(threshold uint64, minPercent, maxPercent int) *Tuner {
	t := &Tuner{threshold: threshold, minPercent: minPercent, maxPercent: maxPercent,
		sample: []metrics.Sample{{Name: liveMetric}}}
	t.tune()
	t.arm()
	return t
}

// Percent is the GOGC the tuner set last.
func (t *Tuner) Percent() int { return int(t.percent.Load()) }

// Stop leaves GOGC as it is and tunes no more.
func (t *Tuner) Stop() { t.stopped.Store(true) }

// sentinel is garbage as soon as it is made: its finalizer runs after the
// next collection, and arms the next one.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

func (t *Tuner) tune() {
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := Percent(live, t.threshold, t.minPercent, t.maxPercent)
	if int64(p) != t.percent.Load() {
		debug.SetGCPercent(p)
		t.percent.Store(int64(p))
	}
}

// Percent is the GOGC that has a heap of live bytes collected next when it
// reaches threshold, within [minPercent, maxPercent]; maxPercent before
// anything was marked live.
func Percent(live, threshold uint64, minPercent, maxPercent int) int {
	if live == 0 {
		return maxPercent
	}
	if live >= threshold {
		return minPercent
	}
	p := (threshold - live) * 100 / live
	return int(min(max(p, uint64(minPercent)), uint64(maxPercent)))
}
