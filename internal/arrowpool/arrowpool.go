// Package arrowpool is an Arrow allocator that reuses the buffers Arrow
// releases. Arrow's Go allocator leaves every buffer to the collector: a
// backfill builds, spools and replays each row several times, and that
// allocation was half of the bytes a sync allocated and most of the
// collector's work. Buffers are kept by size class (powers of two from 64
// bytes to 1 MiB) in sync.Pools, so what is not reused within two
// collections is returned to the heap, and memory stays bounded as with
// the Go allocator.
//
// A buffer freed while something still reads it would read another
// buffer's bytes: Options.Poison overwrites freed buffers so that such a
// bug shows as wrong output in tests rather than hiding behind the
// collector. Note that Arrow's String.Value shares the record's memory: a
// string kept past the record's release (a map key, an id) must be cloned.
// The Go allocator hid that too; the pool's reuse does not.
package arrowpool

import (
	"math/bits"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	minShift  = 6  // 64 bytes: Arrow's alignment, and its smallest padded buffer
	maxShift  = 20 // 1 MiB: larger buffers go to the collector
	alignment = 64
	// PoisonByte fills freed buffers under Options.Poison.
	PoisonByte = 0xA5
)

// Options tune a Pool.
type Options struct {
	// Poison overwrites every buffer as it is freed (tests).
	Poison bool
}

// Pool is a memory.Allocator that reuses freed buffers. It is safe for
// concurrent use.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool // class k: buffers of 64<<k bytes, as *byte
	poison  bool
}

var _ memory.Allocator = (*Pool)(nil)

// New is an empty pool.
func New(opts Options) *Pool { return &Pool{poison: opts.Poison} }

// ForProcess is the pool of a process's batches: poisoned when poison is
// set, and always in a test binary, so that every test that runs the
// engine checks its buffers' lifetimes.
func ForProcess(poison bool) *Pool { return New(Options{Poison: poison || testing.Testing()}) }

// class is the size class of a buffer of size bytes, or -1 if it has none.
func class(size int) int {
	if size > 1<<maxShift {
		return -1
	}
	shift := minShift
	if size > 1<<minShift {
		shift = bits.Len(uint(size - 1))
	}
	return shift - minShift
}

// Allocate returns a zeroed, 64-byte aligned buffer of size bytes.
func (p *Pool) Allocate(size int) []byte {
	k := class(size)
	if k < 0 {
		return alignedMake(size, size)
	}
	n := 1 << (k + minShift)
	if ptr, ok := p.classes[k].Get().(*byte); ok {
		// Only the bytes handed out are cleared (a class is up to twice the
		// size asked); Reallocate clears the rest if it hands them out.
		buf := unsafe.Slice(ptr, n)[:size]
		clear(buf)
		return buf
	}
	return alignedMake(size, n)
}

// Reallocate returns a buffer of size bytes that begins with b's bytes; b
// is freed when it is not the buffer returned.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free gives b back to the pool. Only a buffer of this pool's (its class's
// full capacity, aligned) is kept; anything else is left to the collector.
func (p *Pool) Free(b []byte) {
	n := cap(b)
	if n == 0 {
		return
	}
	b = b[:n]
	k := class(n)
	if k < 0 || n != 1<<(k+minShift) || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment != 0 {
		return
	}
	if p.poison {
		for i := range b {
			b[i] = PoisonByte
		}
	}
	p.classes[k].Put(unsafe.SliceData(b))
}

// alignedMake is a zeroed buffer of size bytes and capacity n, 64-byte
// aligned as Arrow requires.
func alignedMake(size, n int) []byte {
	buf := make([]byte, n)
	if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%alignment == 0 {
		return buf[:size]
	}
	buf = make([]byte, n+alignment)
	shift := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % alignment)
	return buf[shift : shift+size : shift+n]
}
