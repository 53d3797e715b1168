package consume

import (
	"sort"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Methods of one bucket; all require its shard's mutex held.

func (bk *bucket) waiting() int { return len(bk.q) - bk.head }

func (bk *bucket) front() queued { return bk.q[bk.head] }

func (bk *bucket) popFront() {
	bk.head++
	switch {
	case bk.head == len(bk.q): // empty: start over, and give back a big array
		if cap(bk.q) > 64 {
			bk.q = nil
		} else {
			bk.q = bk.q[:0]
		}
		bk.head = 0
	case bk.head >= 32 && 2*bk.head >= len(bk.q): // mostly dead prefix
		bk.q = bk.q[:copy(bk.q, bk.q[bk.head:])]
		bk.head = 0
	}
}

// find returns seq's index among the waiting tickets.
func (bk *bucket) find(seq uint64) (int, bool) {
	w := bk.q[bk.head:]
	i := sort.Search(len(w), func(i int) bool { return w[i].seq >= seq })
	return i, i < len(w) && w[i].seq == seq
}

func (bk *bucket) state(now int64) string {
	switch {
	case bk.waiting() == 0:
		return StateIdle
	case bk.suspendedUntil > now:
		return StateSuspended
	default:
		return StateQueued
	}
}

func (bk *bucket) stat(k policy.Key, now int64) BucketStat {
	st := BucketStat{
		Key: k, Backlog: bk.waiting(), Released: bk.released, Suspends: bk.suspends,
		SuspendedUntil: unixTime(bk.suspendedUntil), LastRelease: unixTime(bk.lastRelease),
		State: bk.state(now),
	}
	if st.Backlog > 0 {
		st.Oldest = time.Unix(0, bk.front().at)
	}
	return st
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
