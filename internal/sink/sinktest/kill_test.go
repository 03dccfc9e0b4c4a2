package sinktest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/blobsink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
)

// The child process of testKilledUpload: the test binary run again with
// these variables set uploads one batch and is killed by its parent.
const (
	childURL     = "SINKTEST_CHILD_URL"
	childChunks  = "SINKTEST_CHILD_CHUNKS"
	childAttempt = "SINKTEST_CHILD_ATTEMPT" // "" is "killed"
	childReplace = "SINKTEST_CHILD_REPLACE" // "1": a redo, rewriting unconditionally
)

func TestMain(m *testing.M) {
	if url := os.Getenv(childURL); url != "" {
		chunks, _ := strconv.Atoi(os.Getenv(childChunks))
		if err := uploadChild(url, chunks); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("committed")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Each chunk of the child's batch: incompressible rows, about 1 MiB.
const (
	chunkRows  = 4096
	chunkBytes = 256
)

// killedBatch is the batch the child uploads, as attempt "killed".
func killedBatch() sink.Batch {
	b := sinktest.Batch("killed", "k1", sinktest.Day, sinktest.Day.Add(time.Hour))
	b.Attempt = "killed"
	b.Parts = []string{sinktest.Day.Format(time.DateOnly)}
	return b
}

// uploadChild commits the batch of chunks chunks, printing "chunk i" as
// each is handed to the encoder and "encoded" after the last: from then
// on only the footer and the upload's completion remain.
func uploadChild(url string, chunks int) error {
	ctx := context.Background()
	s, err := blobsink.New(ctx, blobsink.Options{URL: url, Version: "test"})
	if err != nil {
		return err
	}
	b := killedBatch()
	if a := os.Getenv(childAttempt); a != "" {
		b.Attempt = a
	}
	b.Replace = os.Getenv(childReplace) == "1"
	sc := sinktest.Schema(false)
	each := func(fn func(arrow.Record) error) error {
		for i := range chunks {
			rec := bigChunk(sc, b.ID, i)
			err := fn(rec)
			rec.Release()
			if err != nil {
				return err
			}
			fmt.Println("chunk", i)
		}
		fmt.Println("encoded")
		return nil
	}
	_, err = s.Commit(ctx, b, []sink.Part{{Key: b.Parts[0], Records: sink.Records{Schema: sc, Rows: int64(chunks * chunkRows), Each: each}}})
	return err
}

// bigChunk is chunk i: keys of random hex, so that no codec shrinks them.
func bigChunk(sc *arrow.Schema, id string, i int) arrow.Record {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	buf := make([]byte, chunkBytes/2)
	t := sinktest.Day.Add(time.Duration(i) * time.Second)
	for range chunkRows {
		_, _ = rand.Read(buf)
		bld.Field(0).(*array.StringBuilder).Append(hex.EncodeToString(buf))
		bld.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
		bld.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
		bld.Field(3).(*array.BooleanBuilder).Append(false)
		bld.Field(4).(*array.StringBuilder).Append(id)
		bld.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	}
	return bld.NewRecord()
}

// testKilledUpload: a process SIGKILLed while it uploads a batch (part-way
// through its data, or after its last row at instants spread over the
// upload's completion) never leaves a part of the object: the object is
// absent, or whole (every row, a readable footer) with the killed
// attempt's metadata; Committed takes it for that attempt only. It also
// tells whether an object can appear after the kill, once the process is
// gone (the server completing a request already sent): that is the
// window in which a restarted syncd could check Committed before the
// object lands.
func testKilledUpload(t *testing.T, url string) {
	cases := []struct {
		name   string
		chunks int           // ~1 MiB each: 2 fit one request, 12 need staged blocks (8 MiB each on Azure)
		after  string        // the child's line the kill waits for
		delay  time.Duration // then waits this long
	}{
		{"one request, mid-data", 2, "chunk 0", 0},
		{"blocks, mid-data", 12, "chunk 6", 0},
	}
	for _, d := range []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond} {
		cases = append(cases,
			struct {
				name   string
				chunks int
				after  string
				delay  time.Duration
			}{fmt.Sprintf("one request, %s after the last row", d), 2, "encoded", d},
			struct {
				name   string
				chunks int
				after  string
				delay  time.Duration
			}{fmt.Sprintf("blocks, %s after the last row", d), 12, "encoded", d})
	}
	var appearedLate, whole, absent int
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := url
			if q := strings.IndexByte(url, '?'); q >= 0 {
				prefix = url[:q] + "/kill" + strconv.Itoa(i) + url[q:]
			} else {
				prefix += "/kill" + strconv.Itoa(i)
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), childURL+"="+prefix, childChunks+"="+strconv.Itoa(tc.chunks))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if sc.Text() == tc.after {
					break
				}
			}
			if len(lines) == 0 || lines[len(lines)-1] != tc.after {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the child never printed %q: %v", tc.after, lines)
			}
			time.Sleep(tc.delay)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait() // the process is gone: its sockets are closed
			rest, _ := readRest(sc)
			if strings.Contains(rest, "committed") {
				t.Logf("the upload completed before the kill")
			}

			s, err := blobsink.New(context.Background(), blobsink.Options{URL: prefix, Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b := killedBatch()
			key := s.Key(b, b.Parts[0])
			atKill, err := s.Bucket().Exists(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			// Whatever the server still had of the dead process's
			// requests, it has done within this.
			present := atKill
			for deadline := time.Now().Add(2 * time.Second); !present && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if present, err = s.Bucket().Exists(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			other := b
			other.Attempt = "restarted"
			committed, err := s.Committed(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			fooled, err := s.Committed(ctx, other)
			if err != nil {
				t.Fatal(err)
			}
			if fooled {
				t.Errorf("Committed takes the killed attempt's object for another attempt's")
			}
			if !present {
				absent++
				if committed {
					t.Errorf("Committed says yes with no object in place")
				}
				return
			}
			if !atKill {
				appearedLate++
				t.Logf("the object appeared after the killed process was gone")
			}
			// In place: whole, with the killed attempt's metadata.
			raw, err := s.Bucket().ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			a, err := s.Bucket().Attributes(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			r, err := file.NewParquetReader(bytesReader(raw))
			if err != nil {
				t.Fatalf("a killed upload left a torn object of %d bytes: %v", len(raw), err)
			}
			defer r.Close()
			if got, want := r.NumRows(), int64(tc.chunks*chunkRows); got != want {
				t.Errorf("the killed upload's object holds %d rows, want all %d", got, want)
			}
			if a.Metadata[blobsink.MetaAttempt] != b.Attempt || a.Metadata[blobsink.MetaBatchID] != b.ID {
				t.Errorf("object metadata %v, want batch %s attempt %s", a.Metadata, b.ID, b.Attempt)
			}
			if !committed {
				t.Errorf("the whole object of the killed attempt is not Committed for it")
			}
			whole++
		})
	}
	t.Logf("%d kills: %d left no object, %d a whole object (%d of them appeared only after the process was gone)", len(cases), absent, whole, appearedLate)
}

func readRest(sc *bufio.Scanner) (string, error) {
	var b strings.Builder
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String(), sc.Err()
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
