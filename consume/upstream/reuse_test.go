package upstream

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// A cleanly finished stream leaves its connection for the next request:
// only a cancelled or broken one is closed.
func TestConnectionReusedAfterDone(t *testing.T) {
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(vllmsim.New(vllmsim.Config{Models: []string{"m"}, TTFT: -1, ITL: -1}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
	for _, stream := range []bool{true, true, false, true} {
		if err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", stream, ""), &recordEvents{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 4 sequential requests, want 1", n)
	}
}
