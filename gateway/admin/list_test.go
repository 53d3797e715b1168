package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/consumetest"
	"github.com/pacegate/pacegate/policy"
)

// TestListBuckets runs in a synctest bubble: the handler reads the same
// virtual clock as the test, so the oldest waits are exact.
func TestListBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		// One request a second (virtual); the last one 1 s before the GETs.
		for _, k := range []policy.Key{{Tenant: "acme", Model: llama}, {Tenant: "acme", Model: llama}, {Tenant: "acme", Model: llama}, {Tenant: "vip", Model: "small"}, {Tenant: "acme", Model: "small"}} {
			f.queue.Submit(k, time.Now())
			time.Sleep(time.Second)
		}
		f.queue.Suspend(policy.Key{Tenant: "vip", Model: "small"}, time.Hour)
		body := func(path string) listJSON {
			code, b := f.do(http.MethodGet, path, "")
			if code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, b)
			}
			var out listJSON
			mustUnmarshal(t, b, &out)
			return out
		}
		got := body("/admin/buckets")
		want := `{object:list total:3 offset:0 limit:100 data:[` +
			`{acme meta-llama/Llama-3-8B 3 2 2 queued 5000 0 0} {acme small 1 2 2 queued 1000 0 0} {vip small 1 2 2 suspended 2000 0 1}]}`
		if s := render(got); s != want {
			t.Fatalf("list\n got %s\nwant %s", s, want)
		}
		got = body("/admin/buckets?state=suspended")
		if s := render(got); s != `{object:list total:1 offset:0 limit:100 data:[{vip small 1 2 2 suspended 2000 0 1}]}` {
			t.Fatalf("state=suspended: %s", s)
		}
		got = body("/admin/buckets?model=small&sort=key&offset=1&limit=1")
		if s := render(got); s != `{object:list total:2 offset:1 limit:1 data:[{vip small 1 2 2 suspended 2000 0 1}]}` {
			t.Fatalf("model=small page 2: %s", s)
		}
		f.expect(http.MethodGet, "/admin/buckets?limit=5000", "", 400,
			`{"error":{"message":"limit: must be an integer from 1 to 1000, got \"5000\"","type":"invalid_request_error","param":"limit","code":null}}`)
		f.expect(http.MethodGet, "/admin/buckets?state=busy", "", 400,
			`{"error":{"message":"state: must be idle, queued or suspended, got \"busy\"","type":"invalid_request_error","param":"state","code":null}}`)
		f.expect(http.MethodGet, "/admin/buckets?sort=age", "", 400,
			`{"error":{"message":"sort: must be backlog or key, got \"age\"","type":"invalid_request_error","param":"sort","code":null}}`)
		f.expect(http.MethodGet, "/admin/buckets?offset=-1", "", 400,
			`{"error":{"message":"offset: must be an integer >= 0, got \"-1\"","type":"invalid_request_error","param":"offset","code":null}}`)
	})
}

func render(l listJSON) string {
	s := fmt.Sprintf("{object:%s total:%d offset:%d limit:%d data:[", l.Object, l.Total, l.Offset, l.Limit)
	for i, r := range l.Data {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{%s %s %d %v %v %s %d %d %d}", r.Tenant, r.Model, r.Backlog, r.Rate, r.EffectiveRate, r.State, r.OldestWaitMS, r.Released, r.Suspends)
	}
	return s + "]}"
}

func TestMatrix(t *testing.T) {
	f := newFixture(t)
	f.queue.Submit(policy.Key{Tenant: "acme", Model: "small"}, time.Now())
	f.pacer.SetColumnFactor("small", 0.5)
	code, b := f.do(http.MethodGet, "/admin/matrix?limit=2", "")
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var m matrixJSON
	mustUnmarshal(t, b, &m)
	if m.TotalTenants != 3 || len(m.Tenants) != 2 || m.Tenants[0].Tenant != "a/b" || m.Tenants[1].Tenant != "acme" ||
		len(m.Models) != 2 || m.Models[1].Factor != 0.5 || m.GlobalFactor != 1 {
		t.Fatalf("matrix = %s", b)
	}
	c := m.Tenants[1].Cells[1]
	if c.Model != "small" || c.Backlog != 1 || c.State != "queued" || c.Rate != 2 || c.EffectiveRate != 1 {
		t.Fatalf("acme/small cell = %+v", c)
	}
	code, b = f.do(http.MethodGet, "/admin/matrix?tenant=vi", "")
	mustUnmarshal(t, b, &m)
	if code != 200 || m.TotalTenants != 1 || m.Tenants[0].Tenant != "vip" || m.Tenants[0].Priority != "high" {
		t.Fatalf("tenant=vi: %s", b)
	}
}

// BenchmarkListBuckets100k lists one page of 100 out of 100,000 buckets
// (1,000 tenants × 100 models, every one with a backlog) through the
// HTTP handler.
func BenchmarkListBuckets100k(b *testing.B) {
	q, err := parseConfig(b, testConfig).Quotas()
	if err != nil {
		b.Fatal(err)
	}
	table := policy.NewTable(q)
	buckets := consumetest.New()
	now := time.Now()
	for tn := range 1000 {
		for m := range 100 {
			k := policy.Key{Tenant: fmt.Sprintf("t%04d", tn), Model: fmt.Sprintf("m%03d", m)}
			for range 1 + (tn*7+m)%5 {
				buckets.Submit(k, now)
			}
		}
	}
	h := New(Config{Token: testToken, Table: table, Pacer: policy.NewPacer(table), Buckets: buckets})
	for _, path := range []string{"/admin/buckets", "/admin/buckets?model=m042&state=queued", "/admin/buckets?sort=key&offset=50000"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}
