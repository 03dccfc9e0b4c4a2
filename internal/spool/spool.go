// Package spool keeps the rows of one batch on local disk while the batch is
// fetched, so that a window of any size holds at most one chunk of rows in
// memory: the batch is replayed chunk by chunk when it is committed.
//
// Chunks are Arrow IPC streams (LZ4-compressed). Their schemas may grow from
// one chunk to the next, because a table gains columns while a window is
// read (a new question, a value that needs a __v_json companion); columns
// are only ever added, so Each widens every chunk to the final schema with
// null columns.
package spool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const prefix = "syncd-spool-"

// CleanStale removes the spool and scratch folders under parent
// (os.TempDir() when empty) left by processes that no longer run: a process
// killed while it fetched a large batch leaves its spool behind, one killed
// while it loaded a batch into BigQuery the batch's file. It returns how many it
// removed.
func CleanStale(parent string) (int, error) {
	parent = orTemp(parent)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0, fmt.Errorf("look for stale spool folders in %s: %w", parent, err)
	}
	removed := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !e.IsDir() || !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
			return removed, fmt.Errorf("remove stale spool folder %s: %w", filepath.Join(parent, e.Name()), err)
		}
		removed++
	}
	return removed, nil
}

// alive reports whether a process with this pid runs (signal 0 checks
// without sending anything).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// Spool is the chunks of one batch on disk, one after another in a single
// file. It is not safe for concurrent use.
type Spool struct {
	dir    string
	mem    memory.Allocator
	file   *os.File // created at the first chunk
	end    int64    // where the next chunk goes
	chunks []chunk
	rows   int64
	// One buffer each way, reused by every chunk: a new 1 MiB buffer per
	// chunk written and per chunk replayed was a tenth of a backfill's
	// allocation (and of the collector's work).
	bw *bufio.Writer
	br *bufio.Reader
}

// A chunk is one Arrow IPC stream at [off, off+size) of the spool's file.
// One file for all of them, not one each: creating a file costs ext4 an
// inode search that took 2-3% of a dense backfill's CPU at a file per
// chunk (bench/RESULTS.md, 2026-11-26).
type chunk struct {
	off, size int64
	rows      int64
}

// New creates a spool in a new folder under parent (os.TempDir() when
// empty). A nil mem means memory.DefaultAllocator.
func New(parent string, mem memory.Allocator) (*Spool, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	dir, err := TempDir(parent)
	if err != nil {
		return nil, fmt.Errorf("create a spool folder for a large batch: %w", err)
	}
	return &Spool{dir: dir, mem: mem}, nil
}

// TempDir creates a new folder under parent (os.TempDir() when empty) for
// a batch's scratch files, which the caller removes when done. If the
// process is killed first, CleanStale removes it at the next start.
func TempDir(parent string) (string, error) {
	// The pid in the name lets CleanStale tell a crashed process's folder
	// from a live one's.
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("create a scratch folder under %s (set sync.spool_dir to a writable folder): %w", orTemp(parent), err)
	}
	return dir, nil
}

func orTemp(dir string) string {
	if dir == "" {
		return os.TempDir()
	}
	return dir
}

// Rows is the number of rows added so far.
func (s *Spool) Rows() int64 { return s.rows }

// Add writes rec to disk as the next chunk; the caller keeps ownership of rec.
func (s *Spool) Add(rec arrow.Record) error {
	if s.file == nil {
		f, err := os.Create(filepath.Join(s.dir, "chunks.arrows"))
		if err != nil {
			return fmt.Errorf("spool %d rows: %w", rec.NumRows(), err)
		}
		s.file = f
	}
	size, err := s.write(rec)
	if err != nil {
		// Cut what was written of the chunk, so the file ends where the
		// last whole chunk does.
		_ = s.file.Truncate(s.end)
		return fmt.Errorf("spool %d rows to %s: %w", rec.NumRows(), s.file.Name(), err)
	}
	s.chunks = append(s.chunks, chunk{off: s.end, size: size, rows: rec.NumRows()})
	s.end += size
	s.rows += rec.NumRows()
	return nil
}

// write appends rec to the file at s.end as an IPC stream and returns its size.
func (s *Spool) write(rec arrow.Record) (int64, error) {
	ow := io.NewOffsetWriter(s.file, s.end)
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(ow, 1<<20)
	}
	bw := s.bw
	bw.Reset(ow)
	defer bw.Reset(nil) // hold no file between chunks
	w := ipc.NewWriter(bw, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(s.mem), ipc.WithLZ4())
	if err := w.Write(rec); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return ow.Seek(0, io.SeekCurrent) // how far past s.end it wrote
}

// Each reads the chunks back in order and calls fn with each, widened to
// schema. A record is valid only during its call.
func (s *Spool) Each(schema *arrow.Schema, fn func(arrow.Record) error) error {
	for _, c := range s.chunks {
		if err := s.replay(c, schema, fn); err != nil {
			return err
		}
	}
	return nil
}

// Replay reads chunk i back and calls fn with it, widened to schema. A
// record is valid only during its call.
func (s *Spool) Replay(i int, schema *arrow.Schema, fn func(arrow.Record) error) error {
	if i < 0 || i >= len(s.chunks) {
		return fmt.Errorf("spool has no chunk %d (it holds %d)", i, len(s.chunks))
	}
	return s.replay(s.chunks[i], schema, fn)
}

func (s *Spool) replay(c chunk, schema *arrow.Schema, fn func(arrow.Record) error) error {
	src := io.NewSectionReader(s.file, c.off, c.size)
	if s.br == nil {
		s.br = bufio.NewReaderSize(src, 1<<20)
	}
	s.br.Reset(src)
	defer s.br.Reset(nil)
	r, err := ipc.NewReader(s.br, ipc.WithAllocator(s.mem))
	if err != nil {
		return fmt.Errorf("read spooled rows back from %s at %d: %w", s.file.Name(), c.off, err)
	}
	defer r.Release()
	var rows int64
	for r.Next() {
		wide, err := Widen(r.Record(), schema, s.mem)
		if err != nil {
			return fmt.Errorf("read spooled rows back from %s at %d: %w", s.file.Name(), c.off, err)
		}
		rows += wide.NumRows()
		err = fn(wide)
		wide.Release()
		if err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("read spooled rows back from %s at %d: %w", s.file.Name(), c.off, err)
	}
	if rows != c.rows {
		return fmt.Errorf("read spooled rows back from %s at %d: %d rows, %d were written", s.file.Name(), c.off, rows, c.rows)
	}
	return nil
}

// Close removes the spool's files.
func (s *Spool) Close() error {
	if s.file != nil {
		_ = s.file.Close() // removed next: nothing written matters
		s.file = nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove spool folder %s: %w", s.dir, err)
	}
	return nil
}

// Widen returns rec with the fields of schema, in its order: a field rec has
// (by name, with the same type) keeps its column, a field it lacks becomes
// a column of nulls. A field of rec that schema lacks, or has with another
// type, is an error: tables only gain columns. The caller releases the result.
func Widen(rec arrow.Record, schema *arrow.Schema, mem memory.Allocator) (arrow.Record, error) {
	if rec.Schema().Equal(schema) {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	used := 0
	for i, f := range schema.Fields() {
		idx := rec.Schema().FieldIndices(f.Name)
		switch {
		case len(idx) == 0:
			if !f.Nullable {
				return nil, fmt.Errorf("widen rows to the batch's schema: column %s is REQUIRED but missing from earlier rows", f.Name)
			}
			cols[i] = array.MakeArrayOfNull(mem, f.Type, int(rec.NumRows()))
		case len(idx) > 1:
			return nil, fmt.Errorf("widen rows to the batch's schema: column %s appears %d times", f.Name, len(idx))
		default:
			c := rec.Column(idx[0])
			if !arrow.TypeEqual(c.DataType(), f.Type) {
				return nil, fmt.Errorf("widen rows to the batch's schema: column %s is %s in earlier rows and %s now", f.Name, c.DataType(), f.Type)
			}
			c.Retain()
			cols[i] = c
			used++
		}
	}
	if used != int(rec.NumCols()) {
		return nil, errors.New("widen rows to the batch's schema: earlier rows have columns the final schema lacks")
	}
	out := array.NewRecord(schema, cols, rec.NumRows())
	return out, nil
}
