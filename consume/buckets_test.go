package consume

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestBucketsPositionsAndDeparts(t *testing.T) {
	b := NewBuckets()
	k := policy.Key{Tenant: "acme", Model: "m"}
	var tk []Ticket
	for i := range 5 {
		tk = append(tk, b.Enqueue(k, at(i)))
	}
	b.Cancel(tk[2]) // its Publish failed
	want := []int{1, 2, 0, 3, 4}
	for i, w := range want {
		if got := b.Position(tk[i]); got != w {
			t.Errorf("before departs: Position(%d) = %d, want %d", i, got, w)
		}
	}
	b.Depart(k, tk[0].At)
	b.Depart(k, EnqueuedAt(map[string]string{PropEnqueued: tk[1].EnqueuedProp()}))
	if got := []int{b.Position(tk[3]), b.Position(tk[4]), b.Backlog(k)}; !slices.Equal(got, []int{1, 2, 2}) {
		t.Errorf("after two departs: positions/backlog %v, want [1 2 2]", got)
	}
	// A departure newer than the head means the head left unreported.
	b.Depart(k, tk[4].At)
	if b.Backlog(k) != 0 || b.Position(tk[4]) != 0 {
		t.Errorf("stale entries kept: backlog %d", b.Backlog(k))
	}
	b.Depart(k, time.Time{}) // on an empty queue: a no-op
}

// Many messages enqueued at the same instant (as under synctest) depart
// one at a time.
func TestBucketsSameInstant(t *testing.T) {
	b := NewBuckets()
	k := policy.Key{Tenant: "a", Model: "m"}
	for range 3 {
		b.Enqueue(k, t0)
	}
	b.Depart(k, t0)
	if b.Backlog(k) != 2 {
		t.Fatalf("backlog %d, want 2", b.Backlog(k))
	}
}

func TestBucketsStat(t *testing.T) {
	b := NewBuckets()
	b.now = func() time.Time { return at(100) }
	k := policy.Key{Tenant: "a", Model: "m"}
	if _, ok := b.Stat(k); ok {
		t.Fatal("unknown bucket found")
	}
	b.Enqueue(k, at(10))
	b.Enqueue(k, at(20))
	b.MarkSuspended(k, at(150))
	st, _ := b.Stat(k)
	if st.State != StateSuspended || st.Backlog != 2 || !st.Oldest.Equal(at(10)) || st.Suspends != 1 {
		t.Fatalf("suspended: %+v", st)
	}
	b.MarkReleased(k, at(160))
	b.Depart(k, at(10))
	st, _ = b.Stat(k)
	if st.State != StateQueued || st.Released != 1 || !st.LastRelease.Equal(at(160)) || !st.Oldest.Equal(at(20)) {
		t.Fatalf("released: %+v", st)
	}
	b.Depart(k, at(20))
	if st, ok := b.Stat(k); ok {
		t.Fatalf("an empty bucket is still held: %+v", st)
	}
	b.MarkSuspended(k, at(170)) // records nothing for a bucket with no request
	b.MarkReleased(k, at(170))
	if b.Len() != 0 {
		t.Fatalf("marking an empty bucket created it")
	}
}

// An idle bucket costs nothing: the last departure (or a failed
// publication's Cancel) deletes it, and ticket numbers stay unique across
// its lifetimes, so a stale ticket never matches a new one.
func TestBucketsHoldOnlyQueuedBuckets(t *testing.T) {
	b := NewBuckets()
	k := policy.Key{Tenant: "a", Model: "m"}
	old := b.Enqueue(k, at(1))
	b.Depart(k, at(1))
	failed := b.Enqueue(k, at(2))
	b.Cancel(failed)
	if b.Len() != 0 {
		t.Fatalf("Len = %d, want 0 after the queue emptied", b.Len())
	}
	fresh := b.Enqueue(k, at(3))
	if fresh.Seq == old.Seq || fresh.Seq == failed.Seq {
		t.Fatalf("ticket number reused: %d", fresh.Seq)
	}
	if b.Position(old) != 0 || b.Position(failed) != 0 || b.Position(fresh) != 1 {
		t.Fatalf("positions %d %d %d, want 0 0 1", b.Position(old), b.Position(failed), b.Position(fresh))
	}
}

// fill makes n buckets with pseudo-random backlogs (some empty, some
// suspended) and returns their stats as the reference.
func fill(b *Buckets, n int) []BucketStat {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []BucketStat
	for i := range n {
		k := policy.Key{Tenant: fmt.Sprintf("tenant%05d", i/4), Model: fmt.Sprintf("model%d", i%4)}
		for j := range rng.IntN(5) {
			b.Enqueue(k, at(j))
		}
		if i%3 == 0 {
			b.MarkSuspended(k, t0.Add(time.Hour))
		}
		if st, ok := b.Stat(k); ok {
			all = append(all, st)
		}
	}
	return all
}

func TestBucketsList(t *testing.T) {
	b := NewBuckets()
	b.now = func() time.Time { return t0 }
	all := fill(b, 2000)
	for _, q := range []ListQuery{
		{},
		{Sort: SortKey, Offset: 10, Limit: 7},
		{NonEmpty: true, Offset: 1500, Limit: 50},
		{Tenant: "tenant0001", Model: "model2", Sort: SortKey},
		{Tenant: "tenant00010", Model: "model2", Exact: true},
		{State: StateSuspended, Limit: 1000},
		{State: StateQueued, Sort: SortKey, Offset: 5000},
	} {
		items, total := b.List(q)
		want := reference(all, q)
		limit := cmpOr(q.Limit, 100)
		if total != len(want) {
			t.Errorf("%+v: total %d, want %d", q, total, len(want))
		}
		want = want[min(q.Offset, len(want)):]
		want = want[:min(limit, len(want))]
		if !slices.EqualFunc(items, want, func(a, b BucketStat) bool { return a.Key == b.Key && a.Backlog == b.Backlog }) {
			t.Errorf("%+v: got %d items, want %d (first %v vs %v)", q, len(items), len(want), first(items), first(want))
		}
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func first(s []BucketStat) any {
	if len(s) == 0 {
		return nil
	}
	return s[0].Key
}

// reference filters and sorts all the obvious way.
func reference(all []BucketStat, q ListQuery) []BucketStat {
	var out []BucketStat
	for _, st := range all {
		if q.match(st.Key, st.Backlog, st.State) {
			out = append(out, st)
		}
	}
	less := byBacklog
	if q.Sort == SortKey {
		less = byKey
	}
	slices.SortFunc(out, func(a, b BucketStat) int {
		return less(candidate{a.Key, a.Backlog}, candidate{b.Key, b.Backlog})
	})
	return out
}

func BenchmarkBucketsList100k(b *testing.B) {
	bk := NewBuckets()
	fill(bk, 100000)
	for _, q := range []ListQuery{
		{Limit: 50},
		{NonEmpty: true, Offset: 5000, Limit: 100},
		{Sort: SortKey, Offset: 50000, Limit: 100},
		{Tenant: "tenant123", Limit: 100},
	} {
		b.Run(fmt.Sprintf("sort=%s/offset=%d/tenant=%q", q.Sort, q.Offset, q.Tenant), func(b *testing.B) {
			for b.Loop() {
				bk.List(q)
			}
		})
	}
}

func BenchmarkBucketsEnqueueDepart(b *testing.B) {
	bk := NewBuckets()
	keys := make([]policy.Key, 10000)
	for i := range keys {
		keys[i] = policy.Key{Tenant: fmt.Sprint("t", i), Model: "m"}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(keys))
		for pb.Next() {
			k := keys[i%len(keys)]
			tk := bk.Enqueue(k, t0)
			bk.Position(tk)
			bk.Depart(k, tk.At)
			i++
		}
	})
}
