package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// peakRSS follows a child's peak resident memory (VmHWM of
// /proc/PID/status, in bytes) while it runs.
//
// The child's rusage (ru_maxrss) cannot be trusted for it: Go starts a
// child with vfork (CLONE_VM), and at exec Linux folds the high-water RSS
// of the memory the child leaves, which is the harness's own, into the
// child's maxrss. A harness that holds a million simulated submissions,
// or bqfake's tables, then reads as syncd's peak: a 1M-row BigQuery
// backfill "peaked" at 4,064 MB that way (bench/RESULTS.md, 2026-12-05).
// VmHWM belongs to the address space exec made, syncd's alone; it only
// grows, so the last reading before the child exits is its peak, short of
// the last polling interval.
type peakRSS struct {
	last atomic.Int64
	stop chan struct{}
	done chan struct{}
}

// watchRSS starts polling pid's VmHWM every 50 ms.
func watchRSS(pid int) *peakRSS {
	p := &peakRSS{stop: make(chan struct{}), done: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(p.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if n, ok := vmHWM(path); ok {
				p.last.Store(n)
			}
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// peak stops the polling and returns the last VmHWM read; fallback (the
// rusage figure) when none was.
func (p *peakRSS) peak(fallback int64) int64 {
	close(p.stop)
	<-p.done
	if n := p.last.Load(); n > 0 {
		return n
	}
	return fallback
}

// vmHWM reads the VmHWM line of a /proc status file, in bytes.
func vmHWM(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}
