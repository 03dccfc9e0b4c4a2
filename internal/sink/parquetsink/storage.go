package parquetsink

import (
	"context"
	"errors"
	"io"
)

// Storage is where a Sink keeps its files: a folder on local disk (see
// New) or a bucket (package blobsink). Keys are '/'-separated paths
// relative to the storage's root, <table>/<partition folder>/<batch id>.parquet.
//
// The Sink owns the algorithm (which files a batch has, in which order
// they are written, what counts as committed, Replace and Stale); a
// Storage owns one guarantee: a file it puts is visible whole under its
// key, or not at all.
type Storage interface {
	Lister
	// Stat tells whether a file is at key and, if so, which batch and
	// attempt it names. A file that cannot be read as a batch file is
	// present with an empty BatchID.
	Stat(ctx context.Context, key string) (FileStat, error)
	// Put writes what write produces as key, visible whole or not at all,
	// and returns the bytes written. An error, a write that fails or ctx
	// ending leaves key as it was. With o.IfAbsent, or o.IfVersion, the
	// write happens only while key is absent, or still that version: else
	// Put writes nothing and fails with an error for which
	// errors.Is(err, ErrChanged) holds (a storage without conditional
	// writes relies on one writer, as the state's lock ensures).
	Put(ctx context.Context, key string, o PutOptions, write func(io.Writer) (int64, error)) (int64, error)
	// Keep makes a file found in place last, as Put would have: on disk an
	// attempt may have stopped between its rename and syncing the folders.
	Keep(ctx context.Context, key string) error
	// Delete removes key; an absent key is no error.
	Delete(ctx context.Context, key string) error
	// Entries names up to n entries directly under table's folder (files
	// and partition folders), for the layout check.
	Entries(ctx context.Context, table string, n int) ([]string, error)
	// Purge removes every file of table; readers see the table whole or
	// not at all where the storage can (a folder is moved aside first).
	Purge(ctx context.Context, table string) error
	// String names the storage in messages: its folder or bucket URL.
	String() string
	Close() error
}

// FileStat is what a file at a key names. Version names this state of
// the file for a conditional Put ("" where the storage has none).
type FileStat struct {
	Present                   bool
	BatchID, Attempt, Version string
}

// PutOptions say what a file is, for storages that record it beside the
// bytes (object metadata), and how it may be written.
type PutOptions struct {
	BatchID, Attempt string
	IfAbsent         bool
	IfVersion        string
}

// ErrChanged is Put's error when its condition failed: a file appeared,
// or the one in place is no longer the version it was.
var ErrChanged = errors.New("the file changed (or appeared) since it was looked at")
