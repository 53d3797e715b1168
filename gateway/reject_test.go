package gateway

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// A full bucket names its limit; a full backend (its memory, or the
// broker's quota of LiteTopics) does not blame the bucket.
func TestQueueFullSaysWhichLimit(t *testing.T) {
	x := &exchange{key: policy.Key{Tenant: "acme", Model: "m"}}
	cases := []struct {
		full *consume.FullError
		want string
	}{
		{&consume.FullError{Scope: consume.ScopeBucket, Limit: 100},
			`{"error":{"message":"Request queue full for m in tenant acme: the bucket already holds its limit of 100 queued requests.","type":"requests","param":null,"code":"queue_full"}}`},
		{&consume.FullError{Scope: consume.ScopeEngine},
			`{"error":{"message":"Request queue full for m in tenant acme: the gateway's queue is at its capacity.","type":"requests","param":null,"code":"queue_full"}}`},
	}
	for _, tc := range cases {
		e := queueFull(x, tc.full, time.Second)
		if got := string(e.MarshalBody()); got != tc.want || e.Status != 429 || e.RetryAfter != time.Second {
			t.Errorf("%s: %d %s retry %v\nwant 429 %s retry 1s", tc.full.Scope, e.Status, got, e.RetryAfter, tc.want)
		}
	}
}
