package parquetsink

import (
	"errors"
	"io"
	"runtime"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// leanZstd is arrow's zstd codec with one shared encoder whose window
// matches a Parquet page (about 1 MiB) instead of the library default of
// 8 MiB: arrow keeps a pool of default encoders, each holding a 16 MiB
// history, and a wide row group kept several alive at once (bench/RESULTS.md).
// Pages are compressed one at a time, so a larger window buys nothing. The
// output is standard zstd; decoding and streams stay arrow's.
//
// The level is zstd's fastest: against the default level it spends 3-4%
// less of a backfill's CPU for files 0-6% larger, which are still smaller
// than DuckDB's (bench/RESULTS.md, 2026-11-26).
type leanZstd struct {
	base compress.Codec
	enc  *zstd.Encoder
}

// Registering a codec is how arrow lets a program choose its compressor;
// it is done once, before any file is written.
func init() {
	base, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return // arrow without zstd: nothing to replace
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithZeroFrames(true),
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithWindowSize(1<<20),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return
	}
	compress.RegisterCodec(compress.Codecs.Zstd, leanZstd{base: base, enc: enc})
}

// EncodeAll is safe for concurrent use on a shared encoder.
func (z leanZstd) Encode(dst, src []byte) []byte { return z.enc.EncodeAll(src, dst[:0]) }

func (z leanZstd) EncodeLevel(dst, src []byte, level int) []byte {
	if level == compress.DefaultCompressionLevel {
		return z.Encode(dst, src)
	}
	return z.base.EncodeLevel(dst, src, level)
}

func (z leanZstd) CompressBound(n int64) int64   { return z.base.CompressBound(n) }
func (z leanZstd) Decode(dst, src []byte) []byte { return z.base.Decode(dst, src) }

func (z leanZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	return compress.Decode(z.base, dst, src)
}

var errNoStreams = errors.New("zstd streams are not available")

func (z leanZstd) NewReader(r io.Reader) io.ReadCloser {
	if s, ok := z.base.(compress.StreamingCodec); ok {
		return s.NewReader(r)
	}
	return io.NopCloser(errReader{})
}

func (z leanZstd) NewWriter(w io.Writer) io.WriteCloser {
	if s, ok := z.base.(compress.StreamingCodec); ok {
		return s.NewWriter(w)
	}
	return nil
}

func (z leanZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	if s, ok := z.base.(compress.StreamingCodec); ok {
		return s.NewWriterLevel(w, level)
	}
	return nil, errNoStreams
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errNoStreams }
