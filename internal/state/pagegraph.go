package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The page graph of a bbolt file, checked before bbolt reads it. bbolt
// trusts its pages: a damaged branch element that points back up the tree
// makes its cursor descend forever, growing its stack until the machine
// runs out of memory (a byte flip in a state file did; no panic, so guard
// cannot catch it). checkPageGraph walks every tree from the root of the
// meta page bbolt uses (the valid one of the later transaction) over the
// raw bytes and refuses a page reached twice, a page past the file's end,
// and an element that points outside its page, so that bbolt only ever
// walks a tree.

// Layout of bbolt's pages (go.etcd.io/bbolt/internal/common).
const (
	pageHeaderSize   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	pageElementSize  = 16 // a branch or a leaf element
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	bucketLeafFlag   = 0x01
	bucketHeaderSize = 16 // root pgid uint64, sequence uint64
	boltMagic        = 0xED0CDAED
)

// checkPageGraph checks the page graph of the bbolt file at path.
func checkPageGraph(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	head := make([]byte, 4096)
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[pageHeaderSize+8:]))
	if pageSize < 512 || pageSize > 1<<20 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("page size %d in the first meta page is not a page size", pageSize)
	}
	// bbolt reads the valid meta page of the later transaction; the other
	// one's tree is an older one, whose pages may since have been reused.
	var (
		use      = -1
		root     uint64
		hwm, txn uint64
	)
	for m := 0; m < 2; m++ {
		meta := make([]byte, pageSize)
		if _, err := f.ReadAt(meta, int64(m)*pageSize); err != nil {
			return fmt.Errorf("read meta page %d: %w", m, err)
		}
		r, h, t, ok := readMeta(meta[pageHeaderSize:])
		if ok && (use < 0 || t > txn) {
			use, root, hwm, txn = m, r, h, t
		}
	}
	if use < 0 {
		return errors.New("neither meta page is valid")
	}
	if hwm*uint64(pageSize) > uint64(size) {
		return fmt.Errorf("meta page %d: its pages end at %d bytes, past the file's %d", use, hwm*uint64(pageSize), size)
	}
	w := &pageWalker{f: f, pageSize: pageSize, hwm: hwm, seen: map[uint64]bool{}}
	if err := w.walk(root, 0); err != nil {
		return fmt.Errorf("meta page %d: %w", use, err)
	}
	return nil
}

// readMeta reads a meta page's body: its root bucket's page, its high
// water mark and its transaction, and whether its magic and checksum hold.
func readMeta(b []byte) (root, hwm, txid uint64, ok bool) {
	// magic u32, version u32, pageSize u32, flags u32, root {pgid u64,
	// sequence u64}, freelist u64, pgid u64, txid u64, checksum u64.
	if len(b) < 64 || binary.LittleEndian.Uint32(b) != boltMagic {
		return 0, 0, 0, false
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != binary.LittleEndian.Uint64(b[56:]) {
		return 0, 0, 0, false
	}
	return binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[40:]), binary.LittleEndian.Uint64(b[48:]), true
}

// pageWalker walks the trees of one meta page.
type pageWalker struct {
	f        *os.File
	pageSize int64
	hwm      uint64 // the first page id past the file's pages
	seen     map[uint64]bool
}

// maxDepth bounds the nesting of trees and buckets: syncd's state has a
// few levels; a deeper walk is a damaged file.
const maxDepth = 64

// walk checks the tree whose root is page id, and the buckets it holds.
func (w *pageWalker) walk(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: the tree is deeper than %d levels", id, maxDepth)
	}
	if id < 2 || id >= w.hwm {
		return fmt.Errorf("a branch or bucket names page %d, outside the file's pages 2..%d", id, w.hwm-1)
	}
	if w.seen[id] {
		return fmt.Errorf("page %d is reached twice: the tree loops", id)
	}
	w.seen[id] = true
	head := make([]byte, pageHeaderSize)
	if _, err := w.f.ReadAt(head, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("read page %d: %w", id, err)
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if id+overflow >= w.hwm {
		return fmt.Errorf("page %d runs %d pages past the file's pages", id, overflow)
	}
	page := make([]byte, int64(1+overflow)*w.pageSize)
	if _, err := w.f.ReadAt(page, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("read page %d: %w", id, err)
	}
	for o := uint64(1); o <= overflow; o++ {
		w.seen[id+o] = true
	}
	return w.walkPage(page, id, depth)
}

// walkPage checks one page's elements (page holds it and its overflow).
func (w *pageWalker) walkPage(page []byte, id uint64, depth int) error {
	flags := binary.LittleEndian.Uint16(page[8:])
	count := int(binary.LittleEndian.Uint16(page[10:]))
	if pageHeaderSize+count*pageElementSize > len(page) {
		return fmt.Errorf("page %d: %d elements do not fit it", id, count)
	}
	for i := range count {
		at := pageHeaderSize + i*pageElementSize
		e := page[at : at+pageElementSize]
		switch flags {
		case branchPageFlag:
			pos, ksize := int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
			if at+pos+ksize > len(page) || pos < 0 {
				return fmt.Errorf("page %d: branch element %d points outside the page", id, i)
			}
			if err := w.walk(binary.LittleEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		case leafPageFlag:
			eflags := binary.LittleEndian.Uint32(e)
			pos, ksize, vsize := int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:])), int(binary.LittleEndian.Uint32(e[12:]))
			if pos < 0 || ksize < 0 || vsize < 0 || at+pos+ksize+vsize > len(page) {
				return fmt.Errorf("page %d: leaf element %d points outside the page", id, i)
			}
			if eflags&bucketLeafFlag == 0 {
				continue
			}
			v := page[at+pos+ksize : at+pos+ksize+vsize]
			if len(v) < bucketHeaderSize {
				return fmt.Errorf("page %d: bucket element %d is too short", id, i)
			}
			root := binary.LittleEndian.Uint64(v)
			if root != 0 {
				if err := w.walk(root, depth+1); err != nil {
					return err
				}
				continue
			}
			// An inline bucket: its page follows its header.
			inline := v[bucketHeaderSize:]
			if len(inline) < pageHeaderSize {
				return fmt.Errorf("page %d: inline bucket %d is too short", id, i)
			}
			if depth+1 > maxDepth {
				return fmt.Errorf("page %d: buckets nest deeper than %d levels", id, maxDepth)
			}
			if err := w.walkPage(inline, id, depth+1); err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d: a tree page that is neither a branch nor a leaf (flags %#x)", id, flags)
		}
	}
	return nil
}
