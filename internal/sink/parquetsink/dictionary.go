package parquetsink

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// dictionarySample is how many values of a leaf column, from the start of
// a file's first row group, decide whether the column gets a dictionary.
const dictionarySample = 1024

// dictionaryMinSample is the fewest non-null values that decide; a column
// with fewer is left to arrow's own check.
const dictionaryMinSample = 64

// dictionaryProps chooses each leaf column's encoding from first, the
// records of the file's first row group (nil: no rows).
//
//   - A column whose sampled values are nearly all distinct (ids, times,
//     e-mails, free text, file names and URLs) is written plain from the
//     start. Arrow would hash every value of the column chunk into a
//     dictionary (allocating for each: its binary memo table boxes the
//     value to hash it), find before the first page that the dictionary
//     does not pay, and then re-encode the values plain: all of that work
//     is wasted, and it was about a tenth of the encoder's CPU.
//   - Every other column keeps its dictionary, and gives it up before its
//     first page when the dictionary and its indices are not smaller than
//     the plain values (arrow compares uncompressed sizes, and only for
//     uncompressed columns unless told).
//
// A sample that misleads costs CPU (a dictionary kept to be given up) or
// some size (values distinct at first that repeat later), never a value.
func dictionaryProps(s *arrow.Schema, first []arrow.Record) []parquet.WriterProperty {
	sc, err := pqarrow.ToParquet(s, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil // NewFileWriter reports the same error
	}
	distinct := mostlyDistinctLeaves(sc.NumColumns(), first)
	props := make([]parquet.WriterProperty, 0, sc.NumColumns())
	for i := 0; i < sc.NumColumns(); i++ {
		path := sc.Column(i).ColumnPath()
		if distinct[i] {
			props = append(props, parquet.WithDictionaryPath(path, false))
			continue
		}
		props = append(props, parquet.WithDictionaryCostFallbackPath(path, true))
	}
	return props
}

// mostlyDistinctLeaves reports, for each of the n Parquet leaf columns, in
// schema order, whether at least 90% of its first dictionarySample non-null
// values in recs are distinct. It reports none when the records' leaves do
// not line up with the n columns.
func mostlyDistinctLeaves(n int, recs []arrow.Record) []bool {
	out := make([]bool, n)
	if len(recs) == 0 {
		return out
	}
	perRecord := make([][]arrow.Array, len(recs))
	for r, rec := range recs {
		leaves := make([]arrow.Array, 0, n)
		for _, col := range rec.Columns() {
			leaves = appendLeaves(leaves, col)
		}
		if len(leaves) != n {
			return out
		}
		perRecord[r] = leaves
	}
	sample := distinctSample{seed: maphash.MakeSeed(), keys: make([]uint64, 0, dictionarySample), set: make([]uint64, 2*dictionarySample)}
	for leaf := 0; leaf < n; leaf++ {
		sample.keys = sample.keys[:0]
		ok := true
		for r := 0; r < len(recs) && ok && len(sample.keys) < dictionarySample; r++ {
			ok = sample.add(perRecord[r][leaf])
		}
		if !ok || len(sample.keys) < dictionaryMinSample {
			continue
		}
		out[leaf] = sample.distinct()*10 >= len(sample.keys)*9
	}
	return out
}

// appendLeaves appends arr's leaf arrays in the order pqarrow maps them to
// Parquet columns: a struct's fields in turn, a list's (or map's) values.
// A nested leaf is the child's whole data, which is as good a sample.
func appendLeaves(out []arrow.Array, arr arrow.Array) []arrow.Array {
	switch a := arr.(type) {
	case *array.Struct:
		for i := 0; i < a.NumField(); i++ {
			out = appendLeaves(out, a.Field(i))
		}
		return out
	case array.ListLike:
		return appendLeaves(out, a.ListValues())
	}
	return append(out, arr)
}

// distinctSample gathers the 64-bit keys of sampled values: fixed-width
// values of up to 8 bytes are their own keys, byte strings are hashed.
type distinctSample struct {
	seed maphash.Seed
	keys []uint64
	set  []uint64 // open addressing, twice the sample: distinct's table
}

// add samples arr's non-null values until the sample is full. It reports
// false for a type it does not sample (booleans, decimals), which leaves
// the column to arrow's check.
func (d *distinctSample) add(arr arrow.Array) bool {
	switch a := arr.(type) {
	case *array.String:
		d.each(a, func(i int) uint64 { return maphash.String(d.seed, a.Value(i)) })
		return true
	case *array.Binary:
		d.each(a, func(i int) uint64 { return maphash.Bytes(d.seed, a.Value(i)) })
		return true
	}
	width := 0
	if fw, ok := arr.DataType().(arrow.FixedWidthDataType); ok {
		width = fw.BitWidth() / 8
	}
	bufs := arr.Data().Buffers()
	if (width != 4 && width != 8) || len(bufs) < 2 || bufs[1] == nil {
		return false
	}
	values := bufs[1].Bytes()
	off := arr.Data().Offset()
	if (off+arr.Len())*width > len(values) {
		return false
	}
	if width == 8 {
		d.each(arr, func(i int) uint64 { return binary.LittleEndian.Uint64(values[(off+i)*8:]) })
	} else {
		d.each(arr, func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(values[(off+i)*4:])) })
	}
	return true
}

// each appends key(i) for arr's non-null values i until the sample is full.
func (d *distinctSample) each(arr arrow.Array, key func(i int) uint64) {
	for i := 0; i < arr.Len() && len(d.keys) < dictionarySample; i++ {
		if arr.IsValid(i) {
			d.keys = append(d.keys, key(i))
		}
	}
}

// distinct counts the distinct keys, in a linear-probing set of twice the
// sample's size (sorting them cost as much as the hashing it saves).
func (d *distinctSample) distinct() int {
	clear(d.set)
	mask := uint64(len(d.set) - 1)
	n, zero := 0, false
	for _, k := range d.keys {
		if k == 0 { // 0 marks an empty slot
			zero = true
			continue
		}
		for i := mix(k) & mask; ; i = (i + 1) & mask {
			if d.set[i] == k {
				break
			}
			if d.set[i] == 0 {
				d.set[i] = k
				n++
				break
			}
		}
	}
	if zero {
		n++
	}
	return n
}

// mix spreads a key's bits over the table's (fixed-width keys such as
// microsecond times differ in their low bits in patterns): the finaliser
// of splitmix64.
func mix(k uint64) uint64 {
	k ^= k >> 30
	k *= 0xbf58476d1ce4e5b9
	k ^= k >> 27
	k *= 0x94d049bb133111eb
	return k ^ k>>31
}
