package admin

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/policy"
)

func TestPutBucketRateAndBurst(t *testing.T) {
	f := newFixture(t)
	k := policy.Key{Tenant: "acme", Model: llama}
	f.expect(http.MethodPut, "/admin/buckets/acme/"+llama, `{"rate":5,"burst":10}`, 200,
		`{"tenant":"acme","model":"meta-llama/Llama-3-8B","backlog":0,"rate":5,"effective_rate":5,"state":"idle","oldest_wait_ms":0,"released":0,"suspends":0,"service":0,"share":0,`+
			`"priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":10,"rate":5,"backlog":100,"max_wait":"30s"},"override":{"burst":10,"rate":5}}`)
	if got := f.table.Limits(k); got.Rate != 5 || got.Burst != 10 {
		t.Fatalf("Table.Limits = %+v, want rate 5 burst 10", got)
	}
	if got := f.pacer.EffectiveRate(k); got != 5 {
		t.Fatalf("EffectiveRate = %v, want 5", got)
	}
	// A second PUT merges; null removes one field.
	f.expect(http.MethodPut, "/admin/buckets/acme/"+llama, `{"burst":null,"max_wait":"5s"}`, 200,
		`{"tenant":"acme","model":"meta-llama/Llama-3-8B","backlog":0,"rate":5,"effective_rate":5,"state":"idle","oldest_wait_ms":0,"released":0,"suspends":0,"service":0,"share":0,`+
			`"priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":0,"rate":5,"backlog":100,"max_wait":"5s"},"override":{"rate":5,"max_wait":"5s"}}`)
	// DELETE removes the override.
	f.expect(http.MethodDelete, "/admin/buckets/acme/"+llama, "", 200,
		`{"tenant":"acme","model":"meta-llama/Llama-3-8B","backlog":0,"rate":2,"effective_rate":2,"state":"idle","oldest_wait_ms":0,"released":0,"suspends":0,"service":0,"share":0,`+
			`"priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":0,"rate":2,"backlog":100,"max_wait":"30s"},"override":{}}`)
}

func TestBucketPathEscapes(t *testing.T) {
	f := newFixture(t)
	// A tenant id holding "/" travels as %2F; the model keeps its slash.
	code, body := f.do(http.MethodPut, "/admin/buckets/a%2Fb/"+llama, `{"rate":3}`)
	if code != 200 {
		t.Fatalf("PUT a%%2Fb: %d %s", code, body)
	}
	if got := f.table.Limits(policy.Key{Tenant: "a/b", Model: llama}).Rate; got != 3 {
		t.Fatalf("rate of a/b = %v, want 3", got)
	}
}

// TestGetBucketShowsQueue runs in a synctest bubble: the handler reads
// the same virtual clock as the test, so the oldest wait is exact.
func TestGetBucketShowsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		k := policy.Key{Tenant: "acme", Model: "small"}
		f.queue.Submit(k, time.Now().Add(-1500*time.Millisecond))
		f.queue.Submit(k, time.Now())
		code, body := f.do(http.MethodGet, "/admin/buckets/acme/small", "")
		if code != 200 {
			t.Fatalf("GET: %d %s", code, body)
		}
		var got bucketJSON
		mustUnmarshal(t, body, &got)
		if got.Backlog != 2 || got.State != "queued" || got.OldestWaitMS != 1500 {
			t.Fatalf("bucket = %+v, want backlog 2, queued, oldest wait 1500 ms", got.bucketRow)
		}
	})
}

func TestBucketErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/admin/buckets/acme/" + llama, `{"rate":0}`, 400,
			`{"error":{"message":"rate: must be a number > 0 (requests/s), got 0","type":"invalid_request_error","param":"rate","code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, `{"rate":"fast"}`, 400,
			`{"error":{"message":"rate: must be a number > 0 (requests/s), got \"fast\"","type":"invalid_request_error","param":"rate","code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, `{"burst":-1,"rate":0}`, 400,
			`{"error":{"message":"burst: must be an integer >= 0 and <= 2147483647, got -1","type":"invalid_request_error","param":"burst","code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, `{"max_wait":"soon"}`, 400,
			`{"error":{"message":"max_wait: must be a duration > 0 such as \"30s\", got \"soon\"","type":"invalid_request_error","param":"max_wait","code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, `{"rat":1}`, 400,
			`{"error":{"message":"rat: unknown field; allowed: rpm, tpm, burst, rate, backlog, max_wait","type":"invalid_request_error","param":"rat","code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, `rate=1`, 400,
			`{"error":{"message":"The body must be a JSON object: invalid character 'r' looking for beginning of value.","type":"invalid_request_error","param":null,"code":null}}`},
		{"PUT", "/admin/buckets/acme/" + llama, ``, 400,
			`{"error":{"message":"The body must be a JSON object: empty body.","type":"invalid_request_error","param":null,"code":null}}`},
		{"PUT", "/admin/buckets/nobody/" + llama, `{"rate":1}`, 404,
			`{"error":{"message":"Unknown tenant 'nobody'.","type":"invalid_request_error","param":"tenant","code":"tenant_not_found"}}`},
		{"PUT", "/admin/buckets/acme/gpt-9", `{"rate":1}`, 404,
			`{"error":{"message":"The model 'gpt-9' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"GET", "/admin/buckets/acme", ``, 404,
			`{"error":{"message":"Use /admin/buckets/{tenant}/{model}.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
	} {
		code, body := f.do(tc.method, tc.path, tc.body)
		if code != tc.status || body != tc.want+"\n" {
			t.Errorf("%s %s %s\n got %d %s\nwant %d %s", tc.method, tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
	if _, tenants := f.table.Overrides(); len(tenants) != 0 {
		t.Fatalf("a failed PUT left overrides: %v", tenants)
	}
	if buckets, _ := f.table.Overrides(); len(buckets) != 0 {
		t.Fatalf("a failed PUT left overrides: %v", buckets)
	}
}
