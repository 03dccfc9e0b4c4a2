package shard

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// score is the rendezvous weight of member for account: the live member
// with the highest score is the account's preferred owner. It depends on
// nothing but the two names, so every process computes the same order, and
// an account's preference survives a restart of a member that keeps its
// ID.
func score(account, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(account))
	h.Write([]byte{0})
	h.Write([]byte(member))
	// FNV alone spreads similar names poorly in the high bits; the
	// splitmix64 finalizer mixes them.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// rank is self's place in account's preference among members: 0 when
// self is the preferred owner, 1 when one member comes before it, and so
// on.
func rank(account, self string, members []string) int {
	mine := score(account, self)
	n := 0
	for _, m := range members {
		if m == self {
			continue
		}
		if s := score(account, m); s > mine || s == mine && m < self {
			n++
		}
	}
	return n
}

// quota is self's share of n accounts among the live members (sorted, self
// among them): n/len(members), one more for the first n%len(members)
// members by ID. The shares add up to n, so no member is left below its
// fair share while the others sit at the rounded-up one (with ceil(n/m)
// for everyone, 10 accounts on 4 members could end up 3, 3, 3, 1).
func quota(n int, members []string, self string) int {
	i, ok := slices.BinarySearch(members, self)
	if !ok || len(members) == 0 {
		return 0
	}
	q := n / len(members)
	if i < n%len(members) {
		q++
	}
	return q
}

// byPreference sorts accounts by self's rank among members, the accounts
// that prefer self first; ties by score, then name, so the order is
// stable.
func byPreference(accounts []string, self string, members []string) {
	type pref struct {
		account string
		rank    int
		score   uint64
	}
	ps := make([]pref, len(accounts))
	for i, a := range accounts {
		ps[i] = pref{a, rank(a, self, members), score(a, self)}
	}
	slices.SortFunc(ps, func(x, y pref) int {
		if c := cmp.Compare(x.rank, y.rank); c != 0 {
			return c
		}
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		return cmp.Compare(x.account, y.account)
	})
	for i, p := range ps {
		accounts[i] = p.account
	}
}
