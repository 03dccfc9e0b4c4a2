package app

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/syncd-dev/syncd/internal/config"
)

// Shard is one of Count static shards of the accounts (`--shard I/N`):
// an Indexed Job's pods each sync the accounts whose name hashes to their
// index. Accounts, not streams, are the unit: the streams of one account
// share its key's 5 requests/s, which one process must pace.
type Shard struct{ Index, Count int }

// ParseShard reads "I/N", or "/N" with I from the environment variable
// JOB_COMPLETION_INDEX (an Indexed Job's pod index).
func ParseShard(s string, getenv func(string) string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("--shard %q: write it I/N (shard I of N, counted from 0), or /N to take I from JOB_COMPLETION_INDEX", s)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 {
		return Shard{}, fmt.Errorf("--shard %q: N must be a whole number of shards, at least 1", s)
	}
	if i == "" {
		i = getenv("JOB_COMPLETION_INDEX")
		if i == "" {
			return Shard{}, fmt.Errorf("--shard /%d takes the shard's index from JOB_COMPLETION_INDEX, which is not set: run it in an Indexed Job, or write --shard I/%d", count, count)
		}
	}
	index, err := strconv.Atoi(i)
	if err != nil || index < 0 || index >= count {
		return Shard{}, fmt.Errorf("--shard %q: the index must be a whole number from 0 to %d", s, count-1)
	}
	return Shard{Index: index, Count: count}, nil
}

// Owns reports whether the shard syncs the account: a stable hash of its
// name, the same in every pod and every release.
func (s Shard) Owns(account string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(account))
	return h.Sum64()%uint64(s.Count) == uint64(s.Index)
}

// String is "I/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ShardAccounts keeps the accounts of list the shard owns.
func ShardAccounts(list []config.Account, s *Shard) []config.Account {
	if s == nil {
		return list
	}
	var out []config.Account
	for _, a := range list {
		if s.Owns(a.Name) {
			out = append(out, a)
		}
	}
	return out
}

// ErrShardNeedsBucket is --shard with a local state file: shards run at
// once and share the state, which only a bucket can hold.
var ErrShardNeedsBucket = errors.New("--shard needs state.url (gs://, s3:// or azblob://): the shards run at once and share the state, each account's in its own object under its own lease; a local state file has one writer")
