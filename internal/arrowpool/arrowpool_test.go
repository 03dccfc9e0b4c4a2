package arrowpool

import (
	"bytes"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func aligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))%alignment == 0
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		size, wantCap int
	}{
		{0, 64},
		{1, 64},
		{64, 64},
		{65, 128},
		{1000, 1024},
		{1 << 19, 1 << 19},
		{1<<19 + 1, 1 << 20},
		{1 << maxShift, 1 << maxShift},
		{1<<maxShift + 1, 1<<maxShift + 1}, // beyond the classes: exactly what was asked
	}
	p := New(Options{})
	for _, tc := range tests {
		b := p.Allocate(tc.size)
		if len(b) != tc.size || cap(b) != tc.wantCap || !aligned(b) {
			t.Errorf("Allocate(%d): len %d cap %d aligned %v; want len %d cap %d aligned", tc.size, len(b), cap(b), aligned(b), tc.size, tc.wantCap)
		}
		p.Free(b)
	}
}

// TestReuseIsZeroed: a buffer comes back from the pool zeroed, whatever
// was written in it, and a poisoned pool overwrites it as it is freed.
func TestReuseIsZeroed(t *testing.T) {
	for _, poison := range []bool{false, true} {
		p := New(Options{Poison: poison})
		var reused bool
		for i := 0; i < 100 && !reused; i++ { // the pool may drop a buffer; it keeps most
			b := p.Allocate(300)
			for j := range b[:cap(b)] {
				b[:cap(b)][j] = 7
			}
			old := unsafe.SliceData(b)
			p.Free(b)
			if poison && b[0] != PoisonByte {
				t.Fatalf("poisoned pool: freed buffer holds %#x, want %#x", b[0], PoisonByte)
			}
			c := p.Allocate(400) // the same class, 512 bytes
			reused = unsafe.SliceData(c) == old
			if !bytes.Equal(c, make([]byte, len(c))) {
				t.Fatalf("poison %v: allocated buffer not zeroed", poison)
			}
			// Growing within the class hands out the bytes past 400: zeroed too.
			c = p.Reallocate(cap(c), c)
			if !bytes.Equal(c, make([]byte, cap(c))) {
				t.Fatalf("poison %v: buffer grown within its class not zeroed", poison)
			}
			p.Free(c)
		}
		if !reused {
			t.Errorf("poison %v: no freed buffer was reused in 100 tries", poison)
		}
	}
}

func TestReallocateKeepsBytes(t *testing.T) {
	p := New(Options{})
	b := p.Allocate(10)
	copy(b, "0123456789")
	same := p.Reallocate(64, b) // within the class: the same buffer
	if unsafe.SliceData(same) != unsafe.SliceData(b) || string(same[:10]) != "0123456789" {
		t.Fatalf("Reallocate within capacity moved or changed the bytes: %q", same[:10])
	}
	grown := p.Reallocate(5000, same)
	if len(grown) != 5000 || string(grown[:10]) != "0123456789" || !bytes.Equal(grown[10:], make([]byte, 4990)) {
		t.Fatalf("Reallocate(5000): len %d, head %q", len(grown), grown[:10])
	}
	p.Free(grown)
}

// TestForeignBuffersNotKept: a buffer the pool did not hand out (another
// capacity, or misaligned) is left to the collector, never handed out.
func TestForeignBuffersNotKept(t *testing.T) {
	p := New(Options{})
	foreign := make([]byte, 100)
	odd := p.Allocate(128)[1:]
	p.Free(foreign)
	p.Free(odd)
	for i := 0; i < 10; i++ {
		b := p.Allocate(100)
		if cap(b) != 128 || !aligned(b) {
			t.Fatalf("Allocate(100) handed out cap %d aligned %v", cap(b), aligned(b))
		}
	}
}

// TestArrowRoundTrip builds, writes and reads back records through a
// poisoned pool, checked for leaks, many times over: a buffer Arrow freed
// while still reading it would change what is read back.
func TestArrowRoundTrip(t *testing.T) {
	pool := New(Options{Poison: true})
	mem := memory.NewCheckedAllocator(pool)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 20; round++ {
				roundTrip(t, mem, sc, g*1000+round)
			}
		}()
	}
	wg.Wait()
}

func roundTrip(t *testing.T, mem memory.Allocator, sc *arrow.Schema, seed int) {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	rows := 500 + seed%700
	for r := 0; r < rows; r++ {
		b.Field(0).(*array.StringBuilder).Append(string(rune('a'+r%26)) + "-row")
		if r%5 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(int64(seed*r + r))
		}
		lb := b.Field(2).(*array.ListBuilder)
		lb.Append(true)
		for k := 0; k < r%4; k++ {
			lb.ValueBuilder().(*array.StringBuilder).Append("tag")
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(mem), ipc.WithLZ4())
	if err := w.Write(rec); err != nil {
		t.Error(err)
		return
	}
	if err := w.Close(); err != nil {
		t.Error(err)
		return
	}
	rd, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	if err != nil {
		t.Error(err)
		return
	}
	defer rd.Release()
	if !rd.Next() {
		t.Errorf("no record read back: %v", rd.Err())
		return
	}
	if !array.RecordEqual(rec, rd.Record()) {
		t.Errorf("seed %d: record read back differs", seed)
	}
}

// TestForProcessPoisonsInTests: the engine's pool is poisoned in every test
// binary, asked or not, so that every test running the engine checks its
// buffers' lifetimes.
func TestForProcessPoisonsInTests(t *testing.T) {
	for _, poison := range []bool{false, true} {
		p := ForProcess(poison)
		b := p.Allocate(100)
		b[0] = 1
		p.Free(b)
		if b[0] != PoisonByte {
			t.Errorf("ForProcess(%v) in a test binary: a freed buffer holds %#x, want the poison %#x", poison, b[0], PoisonByte)
		}
	}
}
