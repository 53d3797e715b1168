package admin

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/policy"
)

func TestFactors(t *testing.T) {
	f := newFixture(t)
	f.expect(http.MethodGet, "/admin/factors", "", 200,
		`{"global":1,"models":[{"model":"meta-llama/Llama-3-8B","factor":1,"pinned":false},{"model":"small","factor":1,"pinned":false}],"control":false}`)
	f.expect(http.MethodPut, "/admin/factors/global", `{"factor":1.5}`, 200, `{"global":1.5}`)
	f.expect(http.MethodPut, "/admin/factors/models/"+llama, `{"factor":0.5,"pin":true}`, 200,
		`{"model":"meta-llama/Llama-3-8B","factor":0.5,"pinned":true}`)
	f.expect(http.MethodGet, "/admin/factors", "", 200,
		`{"global":1.5,"models":[{"model":"meta-llama/Llama-3-8B","factor":0.5,"pinned":true},{"model":"small","factor":1,"pinned":false}],"control":false}`)
	// base 2 × column 0.5 × global 1.5; the high-priority tenant ignores the column.
	if got := f.pacer.EffectiveRate(policy.Key{Tenant: "acme", Model: llama}); got != 1.5 {
		t.Fatalf("acme EffectiveRate = %v, want 1.5", got)
	}
	if got := f.pacer.EffectiveRate(policy.Key{Tenant: "vip", Model: llama}); got != 3 {
		t.Fatalf("vip EffectiveRate = %v, want 3", got)
	}
	f.expect(http.MethodDelete, "/admin/factors/models/"+llama, "", 200,
		`{"model":"meta-llama/Llama-3-8B","factor":0.5,"pinned":false}`)
	f.expect(http.MethodGet, "/admin/control", "", 200, `{"enabled":false,"models":[]}`)
}

func TestFactorErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/admin/factors/global", `{"factor":0}`, 400,
			`{"error":{"message":"factor: must be a number > 0 and <= 1000, got 0","type":"invalid_request_error","param":"factor","code":null}}`},
		{"PUT", "/admin/factors/global", `{}`, 400,
			`{"error":{"message":"factor: required","type":"invalid_request_error","param":"factor","code":null}}`},
		{"PUT", "/admin/factors/global", `{"factor":1,"pin":true}`, 400,
			`{"error":{"message":"pin: unknown field; allowed: factor","type":"invalid_request_error","param":"pin","code":null}}`},
		{"PUT", "/admin/factors/models/small", `{"factor":2000}`, 400,
			`{"error":{"message":"factor: must be a number > 0 and <= 1000, got 2000","type":"invalid_request_error","param":"factor","code":null}}`},
		{"PUT", "/admin/factors/models/small", `{"factor":1,"pin":"yes"}`, 400,
			`{"error":{"message":"pin: must be true or false, got \"yes\"","type":"invalid_request_error","param":"pin","code":null}}`},
		{"PUT", "/admin/factors/models/gpt-9", `{"factor":1}`, 404,
			`{"error":{"message":"The model 'gpt-9' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"DELETE", "/admin/factors/models/gpt-9", ``, 404,
			`{"error":{"message":"The model 'gpt-9' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
	} {
		code, body := f.do(tc.method, tc.path, tc.body)
		if code != tc.status || body != tc.want+"\n" {
			t.Errorf("%s %s %s\n got %d %s\nwant %d %s", tc.method, tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
	if f.pacer.GlobalFactor() != 1 || f.pacer.ColumnFactor("small") != 1 {
		t.Fatal("a failed PUT changed a factor")
	}
}

// TestRateChangeMovesPendingSlot shows that a change through the API
// applies to a request already waiting for its release slot: the pacer
// computes the slot from the rate at the time of asking, so raising the
// rate brings it forward and lowering it pushes it back.
func TestRateChangeMovesPendingSlot(t *testing.T) { synctest.Test(t, rateChangeMovesPendingSlot) }

func rateChangeMovesPendingSlot(t *testing.T) {
	f := newFixture(t)
	k := policy.Key{Tenant: "acme", Model: "small"}
	if d := f.pacer.AcquireOrSuspend(k, 1); d != 0 { // first release at t0; rate 2/s
		t.Fatalf("first acquire waited %v", d)
	}
	// The next queued request's slot is t0+500ms.
	steps := []struct {
		put      string // a PUT before asking; "" = none
		path     string
		advance  time.Duration
		wantWait time.Duration
	}{
		{"", "", 100 * time.Millisecond, 400 * time.Millisecond},
		{`{"rate":10}`, "/admin/buckets/acme/small", 0, 0},                        // slot t0+100ms: due now
		{`{"rate":1}`, "/admin/buckets/acme/small", 0, time.Second},               // slower: slot t0+1.1s
		{`{"factor":0.5}`, "/admin/factors/models/small", 0, 2 * time.Second},     // column ×0.5
		{`{"factor":4}`, "/admin/factors/global", 0, 500 * time.Millisecond},      // ×4: 2/s
		{`{"rate":null}`, "/admin/buckets/acme/small", 0, 250 * time.Millisecond}, // back to config 2/s: ×2 = 4/s
		{"", "", 250 * time.Millisecond, 0},                                       // released
		{`{"rpm":60,"rate":0.25}`, "/admin/tenants/acme", 0, 2 * time.Second},     // tenant override 0.25 ×2
	}
	for i, s := range steps {
		time.Sleep(s.advance)
		if s.put != "" {
			if code, body := f.do(http.MethodPut, s.path, s.put); code != 200 {
				t.Fatalf("step %d: PUT %s: %d %s", i, s.path, code, body)
			}
		}
		if got := f.pacer.AcquireOrSuspend(k, 1); got != s.wantWait {
			t.Fatalf("step %d (%s %s): wait %v, want %v", i, s.path, s.put, got, s.wantWait)
		}
	}
}
