package consume

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkHandleDispatch is one delivery of an unpaced request with
// capacity: the work done while a LiteTopic's next message waits (its
// deliveries are sequential), so it bounds one hot tenant's dispatch rate.
func BenchmarkHandleDispatch(b *testing.B) {
	r := newRig(0, nil)
	r.up.do = func(context.Context, *Request, func(Event) error) error { return nil }
	ds := make([]*Delivery, b.N)
	ps := make([]*Pending, b.N)
	for i := range b.N {
		ds[i], ps[i] = r.submit(context.Background(), "t"+strconv.Itoa(i%100))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := r.c.Handle(context.Background(), ds[i]); res.Action != ActionSuccess {
			b.Fatal(res)
		}
	}
	b.StopTimer()
	for _, p := range ps {
		<-p.Events()
	}
}
