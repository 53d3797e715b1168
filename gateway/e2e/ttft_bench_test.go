package e2e

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// BenchmarkTTFT measures time to the first streamed chunk, one request at
// a time, through pacegate and through a bare httputil.ReverseProxy in
// front of the same zero-latency simulator: the gateway's own latency
// without load. Reported as p50-µs per path.
func BenchmarkTTFT(b *testing.B) {
	sim := newSim(b, vllmsim.Config{TTFT: -1, ITL: -1})
	u, _ := url.Parse(sim.url)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	bare := httptest.NewServer(rp)
	defer bare.Close()
	s := startStack(b, `
defaults: {rate: .inf, backlog: 100000}
`+tenantsYAML, sim)
	for _, path := range []struct{ name, url string }{{"bare", bare.URL}, {"pacegate", s.url}} {
		b.Run(path.name, func(b *testing.B) {
			var lat []time.Duration
			for range b.N {
				lat = append(lat, firstChunk(b, path.url))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func firstChunk(b *testing.B, base string) time.Duration {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-alice")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var d time.Duration
	for sc.Scan() {
		if d == 0 && strings.HasPrefix(sc.Text(), "data: ") {
			d = time.Since(start)
		}
	}
	return d
}
