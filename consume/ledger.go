package consume

import (
	"hash/maphash"
	"sort"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

const ledgerShards = 64

// Bucket states reported in BucketStat.State.
const (
	StateIdle      = "idle"      // nothing queued
	StateQueued    = "queued"    // requests waiting, not suspended
	StateSuspended = "suspended" // the consumer suspended it until SuspendedUntil
)

// ledger is the one count of every bucket's queue: which requests wait in
// it, in submission order, and whether the consumer has suspended it.
// Entries are matched by the sequence number their request got at
// submission, never by time, so two requests admitted in one order and
// submitted in the other cannot leave a phantom behind. It backs the
// backlog cap, queue positions, predicted waits and the admin bucket
// matrix, the same on every backend.
//
// A bucket is held only while requests wait in it, so an idle bucket
// costs nothing and memory follows the queued requests; its counters
// (Released, Suspends) cover its current busy period. Buckets are spread
// over 64 shards, each guarded by its own mutex; no method holds more
// than one shard lock. Safe for concurrent use.
type ledger struct {
	seed   maphash.Seed
	shards [ledgerShards]ledgerShard
}

type ledgerShard struct {
	mu sync.Mutex
	// m holds queues by value, so that List scans memory sequentially
	// instead of chasing 100,000 pointers; writers copy, modify, store.
	m       map[policy.Key]waitList // guarded by mu
	nextSeq uint64                  // guarded by mu
	spare   [spareLists][]waiter    // guarded by mu; see takeList
	spares  int                     // guarded by mu: spare[:spares] are kept
	// No two shards' fields share a cache line, wherever the array
	// starts: the runtime puts a header before an allocation this large,
	// so the shards are not 64-byte aligned.
	_ [64]byte
}

// A bucket's list, once it empties, is kept for the next bucket of its
// shard to fill: most buckets hold one request at a time, and go idle
// between two, so without this every request would allocate a list on
// the queue's hop. A shard keeps at most spareLists, of at most
// spareCap requests each (16 KiB for the 64 shards at most).
const spareLists, spareCap = 4, 4

// waitList is one bucket's waiting requests. Guarded by its shard's mutex.
type waitList struct {
	waiting        []waiter // by seq, oldest first
	released       uint64
	suspends       uint64
	suspendedUntil int64 // unix ns
	lastRelease    int64 // unix ns
}

type waiter struct {
	seq uint64
	at  int64 // submission time, unix ns
}

// BucketStat is a snapshot of one bucket's queue.
type BucketStat struct {
	Key            policy.Key
	Backlog        int
	Oldest         time.Time // submission time of the oldest waiting request
	Released       uint64    // requests released to an upstream in this busy period
	Suspends       uint64    // times the consumer suspended the bucket in this busy period
	SuspendedUntil time.Time
	LastRelease    time.Time
	State          string // StateIdle, StateQueued or StateSuspended
}

func newLedger() *ledger {
	l := &ledger{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[policy.Key]waitList)
	}
	return l
}

func (l *ledger) shard(k policy.Key) *ledgerShard {
	// Two string hashes: maphash.Comparable goes through reflection for a
	// struct of strings and allocates.
	h := maphash.String(l.seed, k.Tenant)*31 + maphash.String(l.seed, k.Model)
	return &l.shards[h%ledgerShards]
}

// add appends a request to k's queue unless it already holds limit
// requests (limit <= 0: no limit). It returns the request's sequence
// number, or ok false when the queue is full.
func (l *ledger) add(k policy.Key, at time.Time, limit int) (seq uint64, backlog int, ok bool) {
	s := l.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.m[k]
	if limit > 0 && len(q.waiting) >= limit {
		return 0, len(q.waiting), false
	}
	s.nextSeq++
	if q.waiting == nil {
		q.waiting = s.takeList()
	}
	q.waiting = append(q.waiting, waiter{seq: s.nextSeq, at: at.UnixNano()})
	s.m[k] = q
	return s.nextSeq, len(q.waiting), true
}

// remove takes request seq out of k's queue; released says whether it
// left for an upstream (counted) rather than away. It reports whether the
// queue is now empty. Removing a request twice is a no-op.
func (l *ledger) remove(k policy.Key, seq uint64, released bool, now time.Time) (emptied bool) {
	s := l.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.m[k]
	if !ok {
		return false
	}
	i, found := q.find(seq)
	if !found {
		return false
	}
	q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
	if released {
		q.released++
		q.lastRelease = now.UnixNano()
		q.suspendedUntil = 0
	}
	if len(q.waiting) == 0 {
		delete(s.m, k)
		s.keepList(q.waiting)
		return true
	}
	s.m[k] = q
	return false
}

// takeList returns an empty list for a bucket that was idle: a spare
// one, or nil. Requires s.mu.
func (s *ledgerShard) takeList() []waiter {
	if s.spares == 0 {
		return nil
	}
	s.spares--
	l := s.spare[s.spares]
	s.spare[s.spares] = nil
	return l
}

// keepList keeps the emptied list l for takeList, if there is room for
// it and it is small. Requires s.mu.
func (s *ledgerShard) keepList(l []waiter) {
	if cap(l) <= spareCap && s.spares < spareLists {
		s.spare[s.spares] = l[:0]
		s.spares++
	}
}

// find returns seq's index in the queue.
func (q *waitList) find(seq uint64) (int, bool) {
	i := sort.Search(len(q.waiting), func(i int) bool { return q.waiting[i].seq >= seq })
	return i, i < len(q.waiting) && q.waiting[i].seq == seq
}

// position is seq's place in k's queue, 1 being the next to be released,
// or 0 once it has left.
func (l *ledger) position(k policy.Key, seq uint64) int {
	s := l.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.m[k]
	if i, ok := q.find(seq); ok {
		return i + 1
	}
	return 0
}

// backlog is the number of requests waiting in k's queue.
func (l *ledger) backlog(k policy.Key) int {
	s := l.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m[k].waiting)
}

// suspended records that the consumer suspended k until until. A bucket
// that holds no request is not recorded.
func (l *ledger) suspended(k policy.Key, until time.Time) {
	s := l.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.m[k]; ok {
		q.suspends++
		q.suspendedUntil = until.UnixNano()
		s.m[k] = q
	}
}

// stat returns a snapshot of k's queue.
func (l *ledger) stat(k policy.Key) (BucketStat, bool) {
	s := l.shard(k)
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.m[k]
	if !ok {
		return BucketStat{}, false
	}
	return q.stat(k, now), true
}

func (q *waitList) state(now int64) string {
	switch {
	case len(q.waiting) == 0:
		return StateIdle
	case q.suspendedUntil > now:
		return StateSuspended
	default:
		return StateQueued
	}
}

func (q *waitList) stat(k policy.Key, now int64) BucketStat {
	st := BucketStat{
		Key: k, Backlog: len(q.waiting), Released: q.released, Suspends: q.suspends,
		SuspendedUntil: unixTime(q.suspendedUntil), LastRelease: unixTime(q.lastRelease),
		State: q.state(now),
	}
	if st.Backlog > 0 {
		st.Oldest = time.Unix(0, q.waiting[0].at)
	}
	return st
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
