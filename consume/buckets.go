package consume

import (
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

const bucketShards = 64

// Bucket states reported in BucketStat.State.
const (
	StateIdle      = "idle"      // nothing queued
	StateQueued    = "queued"    // messages waiting, not suspended
	StateSuspended = "suspended" // the consumer suspended it until SuspendedUntil
)

// Buckets tracks each tenant+model bucket's queue as the gateway sees it:
// who is waiting, in what order, and whether the consumer has suspended
// it. It backs the SSE queue-position comments, predicted-wait admission
// and the admin bucket matrix, and works the same on every backend.
//
// Create it with [NewBuckets]; it is safe for concurrent use. Buckets are
// spread over 64 shards, each guarded by its own mutex; no method holds
// more than one shard lock at a time. A bucket is held only while requests
// wait in it: the last departure deletes it, so an idle bucket costs
// nothing and memory follows the queued requests. Its counters (Released,
// Suspends) therefore cover its current busy period; lifetime totals are
// the Prometheus counters.
type Buckets struct {
	seed   maphash.Seed
	now    func() time.Time // time.Now; a field so that tests can pin it
	shards [bucketShards]bucketShard
}

type bucketShard struct {
	mu sync.Mutex
	// m holds buckets by value, so that List scans memory sequentially
	// instead of chasing 100,000 pointers; writers copy, modify, store.
	m       map[policy.Key]bucket // guarded by mu
	nextSeq uint64                // guarded by mu; ticket numbers, unique across bucket lifetimes
	_       [40]byte              // keep shards on separate cache lines
}

// bucket is one tenant+model queue. Guarded by its shard's mutex.
type bucket struct {
	q              []queued // waiting tickets, oldest first, from q[head]
	head           int
	released       uint64
	suspends       uint64
	suspendedUntil int64 // unix ns
	lastRelease    int64 // unix ns
}

type queued struct {
	seq uint64
	at  int64 // enqueue time, unix ns
}

// Ticket identifies one enqueued request of a bucket. Its At must travel
// with the message (see [Ticket.EnqueuedProp]) so the consumer can report
// its departure.
type Ticket struct {
	Key policy.Key
	Seq uint64
	At  time.Time
}

// EnqueuedProp is the value for the message's [PropEnqueued] property.
func (t Ticket) EnqueuedProp() string { return strconv.FormatInt(t.At.UnixNano(), 10) }

// EnqueuedAt parses the [PropEnqueued] property; zero if absent or bad.
func EnqueuedAt(props map[string]string) time.Time {
	n, err := strconv.ParseInt(props[PropEnqueued], 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// BucketStat is a snapshot of one bucket.
type BucketStat struct {
	Key            policy.Key
	Backlog        int
	Oldest         time.Time // enqueue time of the oldest waiting request
	Released       uint64    // requests released to an upstream
	Suspends       uint64    // times the consumer suspended the bucket
	SuspendedUntil time.Time
	LastRelease    time.Time
	State          string // StateIdle, StateQueued or StateSuspended
}

// NewBuckets returns an empty tracker.
func NewBuckets() *Buckets {
	b := &Buckets{seed: maphash.MakeSeed(), now: time.Now}
	for i := range b.shards {
		b.shards[i].m = make(map[policy.Key]bucket)
	}
	return b
}

func (b *Buckets) shard(k policy.Key) *bucketShard {
	// Two string hashes: maphash.Comparable goes through reflection for a
	// struct of strings and allocates.
	h := maphash.String(b.seed, k.Tenant)*31 + maphash.String(b.seed, k.Model)
	return &b.shards[h%bucketShards]
}

// Enqueue records a request joining k's queue; call it before Publish.
func (b *Buckets) Enqueue(k policy.Key, now time.Time) Ticket {
	s := b.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	bk := s.m[k]
	s.nextSeq++
	bk.q = append(bk.q, queued{seq: s.nextSeq, at: now.UnixNano()})
	s.m[k] = bk
	return Ticket{Key: k, Seq: s.nextSeq, At: now}
}

// Cancel removes t from its queue, for a Publish that failed.
func (b *Buckets) Cancel(t Ticket) {
	s := b.shard(t.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	bk, ok := s.m[t.Key]
	if !ok {
		return
	}
	if i, ok := bk.find(t.Seq); ok {
		bk.q = slices.Delete(bk.q, bk.head+i, bk.head+i+1)
		s.store(t.Key, bk)
	}
}

// store writes bk back, or deletes it once nothing waits in it. Requires
// s.mu held.
func (s *bucketShard) store(k policy.Key, bk bucket) {
	if bk.waiting() == 0 {
		delete(s.m, k)
		return
	}
	s.m[k] = bk
}

// Depart records that the oldest waiting message of k left the queue
// (released or dropped). Messages leave in FIFO order; entries older than
// enqueuedAt are stale (they left unreported) and go too. A zero
// enqueuedAt removes just the oldest entry.
func (b *Buckets) Depart(k policy.Key, enqueuedAt time.Time) {
	s := b.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	bk, ok := s.m[k]
	if !ok || bk.waiting() == 0 {
		return
	}
	defer func() { s.store(k, bk) }()
	at := enqueuedAt.UnixNano()
	if enqueuedAt.IsZero() {
		at = bk.front().at
	}
	for bk.waiting() > 0 && bk.front().at < at {
		bk.popFront()
	}
	if bk.waiting() > 0 && bk.front().at == at {
		bk.popFront()
	}
}

// Position is t's place in its queue, 1 being the next to be released, or
// 0 once it has left.
func (b *Buckets) Position(t Ticket) int {
	s := b.shard(t.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if bk, ok := s.m[t.Key]; ok {
		if i, ok := bk.find(t.Seq); ok {
			return i + 1
		}
	}
	return 0
}

// Len is the number of buckets held: those with requests waiting.
func (b *Buckets) Len() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Backlog is the number of requests waiting in k's queue.
func (b *Buckets) Backlog(k policy.Key) int {
	s := b.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if bk, ok := s.m[k]; ok {
		return bk.waiting()
	}
	return 0
}

// MarkSuspended records that the consumer suspended k until until. A
// bucket that holds no request is not recorded.
func (b *Buckets) MarkSuspended(k policy.Key, until time.Time) {
	b.update(k, func(bk *bucket) {
		bk.suspends++
		bk.suspendedUntil = until.UnixNano()
	})
}

// MarkReleased records that a request of k was released to an upstream;
// call it before the request's Depart, which may delete the bucket.
func (b *Buckets) MarkReleased(k policy.Key, at time.Time) {
	b.update(k, func(bk *bucket) {
		bk.released++
		bk.lastRelease = at.UnixNano()
		bk.suspendedUntil = 0
	})
}

// update applies f to k's bucket if it holds requests.
func (b *Buckets) update(k policy.Key, f func(*bucket)) {
	s := b.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if bk, ok := s.m[k]; ok {
		f(&bk)
		s.m[k] = bk
	}
}

// Stat returns a snapshot of k's bucket.
func (b *Buckets) Stat(k policy.Key) (BucketStat, bool) {
	s := b.shard(k)
	now := b.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	bk, ok := s.m[k]
	if !ok {
		return BucketStat{}, false
	}
	return bk.stat(k, now), true
}
