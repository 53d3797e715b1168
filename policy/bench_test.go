package policy

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchKeys are pre-created keys; each parallel goroutine walks them from
// its own offset, so the benchmark measures decisions on existing keys
// spread over shards rather than one mutex.
var benchKeys = func() []Key {
	ks := make([]Key, 1024)
	for i := range ks {
		ks[i] = Key{Tenant: "tenant-" + strconv.Itoa(i), Model: "llama-3-8b"}
	}
	return ks
}()

var benchOffset atomic.Int64

// parallel runs decide on existing keys from b.RunParallel.
func parallel(b *testing.B, warm func(Key), decide func(Key)) {
	for _, k := range benchKeys {
		warm(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(benchOffset.Add(97))
		for pb.Next() {
			decide(benchKeys[i&(len(benchKeys)-1)])
			i++
		}
	})
}

func benchTable(b *testing.B) *Table {
	d := Limits{RPM: 600000, TPM: 100000000, Burst: 1000000, Rate: 5, Backlog: 1000, MaxWait: 30 * time.Second}
	t1 := d
	t1.Rate = 10
	return NewTable(mustQuotas(b, d, nil, TenantSpec{ID: "tenant-1", Keys: digests("k1"), Limits: t1}))
}

func BenchmarkPacerAcquire(b *testing.B) {
	p := NewPacer(benchTable(b))
	now := time.Now()
	parallel(b, func(k Key) { p.AcquireOrSuspendAt(now, k, 1) },
		func(k Key) { p.AcquireOrSuspendAt(now, k, 1) })
}

func BenchmarkPacerAcquireClock(b *testing.B) {
	p := NewPacer(benchTable(b)) // includes time.Now
	parallel(b, func(k Key) { p.AcquireOrSuspend(k, 1) }, func(k Key) { p.AcquireOrSuspend(k, 1) })
}

func BenchmarkTokenBucket(b *testing.B) {
	p := BucketParams{Capacity: 1 << 40, Refill: 1}
	tb := NewTokenBucket(p)
	now := time.Now()
	parallel(b, func(k Key) { tb.TakeAt(now, k, 1, p) }, func(k Key) { tb.TakeAt(now, k, 1, p) })
}

func BenchmarkFixedWindow(b *testing.B) {
	w := NewFixedWindow(time.Minute, 0)
	now := time.Now()
	parallel(b, func(k Key) { w.ReserveAt(now, k, 1<<62, 1) }, func(k Key) { w.ReserveAt(now, k, 1<<62, 1) })
}

// BenchmarkAdmitter measures one Admit and its Refund (which keeps the
// caps from filling) per op, every check enabled except the org's.
func BenchmarkAdmitter(b *testing.B) {
	a := NewAdmitter(benchTable(b))
	tenants := map[string]*Tenant{}
	for _, k := range benchKeys {
		tenants[k.Tenant] = &Tenant{ID: k.Tenant}
	}
	admit := func(k Key) {
		if d := a.Admit(tenants[k.Tenant], k.Model, 100); d.Allowed {
			a.Refund(d.Reservation)
		}
	}
	parallel(b, admit, admit)
}

// BenchmarkPacerMemory1M holds 1,000,000 keys in a pacer and reports the
// heap they cost, key strings included.
func BenchmarkPacerMemory1M(b *testing.B) {
	const n = 1_000_000
	var bytesPerKey float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p := NewPacer(constRate(1))
		now := time.Now()
		for i := range n {
			p.AcquireOrSuspendAt(now, Key{Tenant: "tenant-" + strconv.Itoa(i), Model: "llama-3-8b"}, 1)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if p.Len() != n {
			b.Fatalf("Len = %d", p.Len())
		}
		bytesPerKey = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(p)
	}
	b.ReportMetric(bytesPerKey, "bytes/key")
	b.ReportMetric(bytesPerKey*n/1e6, "MB/1M-keys")
}
