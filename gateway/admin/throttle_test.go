package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/policy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tryStep is one request at t0+at from src: good says whether its token
// is right; wantWait is 0 when it may be checked, otherwise how long
// reserve says to wait.
type tryStep struct {
	at       time.Duration
	src      string
	good     bool
	wantWait time.Duration
}

func runTries(t *testing.T, l *authLimiter, steps []tryStep) {
	t.Helper()
	for i, s := range steps {
		now := t0.Add(s.at)
		k, wait := l.reserve(now, netip.MustParsePrefix(s.src))
		if wait != s.wantWait {
			t.Fatalf("step %d: reserve(t0+%s, %s) waits %s, want %s", i, s.at, s.src, wait, s.wantWait)
		}
		if wait == 0 && s.good {
			l.refund(now, k)
		}
	}
}

const (
	srcA = "192.0.2.1/32"
	srcC = "198.51.100.7/32"
)

// Burst 3, one more try per 10 s, per source.
func TestAuthLimiterSteps(t *testing.T) {
	runTries(t, newAuthLimiter(3, 10*time.Second, 100), []tryStep{
		{at: 0, src: srcA}, // 1st wrong token
		{at: 0, src: srcA}, // 2nd
		{at: 0, src: srcA}, // 3rd: the budget is spent
		{at: 0, src: srcA, wantWait: 10 * time.Second},             // slowed down, token unchecked
		{at: 0, src: srcA, good: true, wantWait: 10 * time.Second}, // even the right one
		{at: 0, src: srcC, good: true},                             // another source is not
		{at: 0, src: srcC},                                         // nor its wrong tokens
		{at: 4 * time.Second, src: srcA, wantWait: 6 * time.Second},
		{at: 10 * time.Second, src: srcA}, // one try earned, spent
		{at: 10 * time.Second, src: srcA, wantWait: 10 * time.Second},
		{at: 20 * time.Second, src: srcA, good: true}, // a right token costs nothing:
		{at: 20 * time.Second, src: srcA, good: true},
		{at: 20 * time.Second, src: srcA}, // the earned try is still there
		{at: 20 * time.Second, src: srcA, wantWait: 10 * time.Second},
		{at: 50 * time.Second, src: srcA}, // 30 s later: three tries again
		{at: 50 * time.Second, src: srcA},
		{at: 50 * time.Second, src: srcA},
		{at: 50 * time.Second, src: srcA, wantWait: 10 * time.Second},
		{at: 45 * time.Second, src: srcA, wantWait: 15 * time.Second}, // the clock jumps back
	})
}

// Concurrent wrong tokens cannot overdraw a budget: exactly burst pass.
func TestAuthLimiterConcurrent(t *testing.T) {
	l := newAuthLimiter(5, time.Minute, 100)
	src := netip.MustParsePrefix(srcA)
	passed := make(chan bool, 100)
	for range 100 {
		go func() { _, wait := l.reserve(t0, src); passed <- wait == 0 }()
	}
	n := 0
	for range 100 {
		if <-passed {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d wrong tokens were checked, want 5", n)
	}
}

// The table holds at most max sources. Idle ones are evicted to make
// room; while every one is busy, new sources share the overflow budget.
func TestAuthLimiterBounded(t *testing.T) {
	l := newAuthLimiter(2, 10*time.Second, 50)
	src := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/32", i/256, i%256)) }
	for i := range 1000 { // one wrong token each: all busy for 10 s
		if _, wait := l.reserve(t0, src(i)); wait > 0 {
			break // the overflow budget is spent; the table is full
		}
	}
	if n := l.tries.Len(); n != 51 {
		t.Fatalf("%d entries, want 50 sources and the overflow", n)
	}
	// The overflow took two tries (burst 2) and is now spent, for every
	// new source alike.
	for i := 1000; i < 1010; i++ {
		if k, wait := l.reserve(t0, src(i)); wait != 10*time.Second || k != overflowKey {
			t.Fatalf("new source %d while full: %v waits %s, want the overflow's 10s", i, k, wait)
		}
	}
	// A remembered source keeps its own budget.
	if k, wait := l.reserve(t0, src(0)); wait != 0 || k.Tenant != src(0).String() {
		t.Fatalf("a remembered source lost its budget: %v waits %s", k, wait)
	}
	// 10 s later every entry is idle: a new source evicts them and gets
	// its own entry.
	later := t0.Add(10 * time.Second)
	if k, wait := l.reserve(later, src(2000)); wait != 0 || k.Tenant != src(2000).String() {
		t.Fatalf("a new source after the entries went idle: %v waits %s", k, wait)
	}
	if n := l.tries.Len(); n > 50 {
		t.Fatalf("%d sources remembered, want at most 50", n)
	}
	if !l.busy(later, policy.Key{Tenant: src(2000).String()}) {
		t.Fatal("the new source has no entry of its own")
	}
}

func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.1:4242", "192.0.2.1/32"},
		{"[::ffff:192.0.2.1]:4242", "192.0.2.1/32"},
		{"[2001:db8:1:2:3:4:5:6]:4242", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:4242", "fe80::/64"},
		{"not an address", "invalid Prefix"},
	} {
		if got := sourceOf(c.in).String(); got != c.want {
			t.Errorf("sourceOf(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Through the API: the sixth wrong token in a row from one address gets
// 429 with Retry-After, so does the right token until a try is earned,
// and another address is served meanwhile.
func TestAuthSlowsDownWrongTokens(t *testing.T) { synctest.Test(t, authSlowsDownWrongTokens) }

func authSlowsDownWrongTokens(t *testing.T) {
	f := newFixture(t)
	send := func(remote, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/admin/factors", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		return rec
	}
	const tooMany = `{"error":{"message":"Too many wrong admin tokens from this address; retry after the time in Retry-After.","type":"invalid_request_error","param":null,"code":"too_many_admin_token_failures"}}` + "\n"
	attacker, operator := "203.0.113.9:5000", "192.0.2.50:6000"
	for i := range DefaultAuthBurst {
		if rec := send(attacker, fmt.Sprintf("Bearer guess-%d", i)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, rec.Code)
		}
	}
	for _, auth := range []string{"Bearer guess-next", "Bearer " + testToken} {
		rec := send(attacker, auth)
		if rec.Code != http.StatusTooManyRequests || rec.Body.String() != tooMany || rec.Header().Get("Retry-After") != "10" {
			t.Fatalf("%s after %d wrong tokens: %d Retry-After %q %s", auth, DefaultAuthBurst, rec.Code,
				rec.Header().Get("Retry-After"), rec.Body)
		}
	}
	if rec := send(operator, "Bearer "+testToken); rec.Code != http.StatusOK {
		t.Fatalf("another address: %d, want 200", rec.Code)
	}
	time.Sleep(DefaultAuthRefill - time.Millisecond)
	if rec := send(attacker, "Bearer "+testToken); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("1 ms before the next try: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	time.Sleep(time.Millisecond)
	if rec := send(attacker, "Bearer "+testToken); rec.Code != http.StatusOK {
		t.Fatalf("right token once a try is earned: %d, want 200", rec.Code)
	}
	if rec := send(attacker, "Bearer guess-again"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the earned try, not spent by the right token: %d, want 401", rec.Code)
	}
	if rec := send(attacker, "Bearer guess-again"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("then slowed down again: %d, want 429", rec.Code)
	}
	if strings.Contains(send(attacker, "Bearer "+testToken).Body.String(), testToken) {
		t.Fatal("the token leaked into a 429")
	}
}
