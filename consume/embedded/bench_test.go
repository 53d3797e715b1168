package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// BenchmarkPublishDeliver measures publish→deliver latency with 1 and
// 10,000 active LiteTopics. Each topic has one message outstanding and
// publishes its next one when the previous is delivered, so with 10,000
// topics every message waits behind the other ready topics: the latency
// is one round of the ready queue.
func BenchmarkPublishDeliver(b *testing.B) {
	for _, topics := range []int{1, 10000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) { benchLatency(b, topics) })
	}
}

func benchLatency(b *testing.B, topics int) {
	e := New(Config{Workers: 64, MaxMessages: 1 << 22, Logger: quiet})
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprint("topic-", i)
	}
	n := b.N
	pub := make([]int64, n)
	lat := make([]int64, n)
	var count atomic.Int64
	done := make(chan struct{})
	publish := func(i int) {
		body := binary.LittleEndian.AppendUint64(nil, uint64(i))
		pub[i] = time.Now().UnixNano()
		if err := e.Publish(context.Background(), &consume.Message{ID: "x", LiteTopic: names[i%topics], Body: body}); err != nil {
			panic(err)
		}
	}
	e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		i := int(binary.LittleEndian.Uint64(d.Body))
		lat[i] = time.Now().UnixNano() - pub[i]
		if next := i + topics; next < n {
			publish(next)
		}
		if count.Add(1) == int64(n) {
			close(done)
		}
		return consume.Success()
	})
	b.ResetTimer()
	start := time.Now()
	for i := range min(topics, n) {
		publish(i)
	}
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	e.Close(context.Background())
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[n*99/100])/1e3, "p99-µs")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkDispatchIdle measures the cost of dispatching one message (the
// worker side only: the queue is filled before the clock starts) with 10
// and with 1,000,000 idle LiteTopics present. Compare the two ns/op.
func BenchmarkDispatchIdle(b *testing.B) {
	for _, idle := range []int{10, 1000000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			e := New(Config{Workers: 8, MaxMessages: 1 << 30, MaxBytes: 1 << 40, Logger: quiet})
			addIdle(e, idle)
			const active = 100
			for i := range b.N {
				m := &consume.Message{ID: "x", LiteTopic: fmt.Sprint("active-", i%active)}
				if err := e.Publish(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
			var count atomic.Int64
			done := make(chan struct{})
			runtime.GC()
			b.ResetTimer()
			e.Start(func(context.Context, *consume.Delivery) consume.Result {
				if count.Add(1) == int64(b.N) {
					close(done)
				}
				return consume.Success()
			})
			<-done
			b.StopTimer()
			e.Close(context.Background())
		})
	}
}

// addIdle creates n empty topics, as n publish+ack cycles would leave
// them (state, idle list and map), without spending minutes doing so.
func addIdle(e *Engine, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now().UnixNano()
	for i := range n {
		t := &topic{name: fmt.Sprint("idle-", i), state: stIdle, due: now}
		e.topics[t.name] = t
		e.idle.push(t)
	}
}

// BenchmarkMemory reports the heap held per idle LiteTopic and per queued
// message (body and the caller's strings excluded), through the real
// Publish and acknowledge paths.
func BenchmarkMemory(b *testing.B) {
	const n = 200000
	ids := make([]string, n)
	names := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprint("id-", i)
		names[i] = fmt.Sprint("tenant-", i, "__model")
	}
	body := []byte("shared body")
	b.Run("idle-topic", func(b *testing.B) {
		for b.Loop() {
			e := New(Config{MaxMessages: n, Logger: quiet})
			before := heap()
			done := make(chan struct{})
			var count atomic.Int64
			e.Start(func(context.Context, *consume.Delivery) consume.Result {
				if count.Add(1) == n {
					close(done)
				}
				return consume.Success()
			})
			for i := range n {
				e.Publish(context.Background(), &consume.Message{ID: ids[i], LiteTopic: names[i], Body: body})
			}
			<-done
			waitEmpty(e)
			b.ReportMetric(float64(heap()-before)/n, "B/topic")
			e.Close(context.Background())
		}
	})
	b.Run("queued-message", func(b *testing.B) {
		for b.Loop() {
			e := New(Config{MaxMessages: n, Logger: quiet})
			for i := range 1000 { // topics exist first: only messages are counted
				e.Publish(context.Background(), &consume.Message{ID: ids[i], LiteTopic: names[i], Body: body})
			}
			before := heap()
			for i := 1000; i < n; i++ {
				e.Publish(context.Background(), &consume.Message{ID: ids[i], LiteTopic: names[i%1000], Body: body})
			}
			b.ReportMetric(float64(heap()-before)/float64(n-1000), "B/msg")
			e.Close(context.Background())
		}
	})
}

func heap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func waitEmpty(e *Engine) {
	for e.Stats().Messages != 0 || e.Stats().InFlight != 0 {
		runtime.Gosched()
	}
}

// BenchmarkResumeLateness measures how late the timer goroutine resumes a
// suspended topic in real time (the engine promises about 1 ms).
func BenchmarkResumeLateness(b *testing.B) {
	e := New(Config{Workers: 4, Logger: quiet})
	const d = 2 * time.Millisecond
	var due atomic.Int64
	late := make([]int64, 0, b.N)
	next := make(chan struct{}, 1)
	e.Start(func(_ context.Context, dl *consume.Delivery) consume.Result {
		if dl.Properties["s"] == "" {
			dl.Properties["s"] = "1"
			due.Store(time.Now().Add(d).UnixNano())
			return consume.Suspend(d)
		}
		late = append(late, time.Now().UnixNano()-due.Load())
		next <- struct{}{}
		return consume.Success()
	})
	for b.Loop() {
		e.Publish(context.Background(), &consume.Message{ID: "x", LiteTopic: "t", Properties: map[string]string{}})
		<-next
	}
	e.Close(context.Background())
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2])/1e3, "p50-late-µs")
	b.ReportMetric(float64(late[len(late)*99/100])/1e3, "p99-late-µs")
}
