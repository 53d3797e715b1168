// Package policytest helps tests that run the hard caps on the real
// clock: a whole gateway on real sockets, which cannot run in a
// testing/synctest bubble.
package policytest

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// InOneWindow waits for the next cap window when the current one has
// less than need left, so that what a test counts against a cap (the
// 429 after the limit, the remaining-tokens header after a charge) is
// counted in one window: at the window's turn every count starts again
// (policy.CapWindow).
func InOneWindow(t testing.TB, need time.Duration) {
	t.Helper()
	if need >= policy.CapWindow {
		t.Fatalf("policytest: a test that needs %v cannot fit in one cap window of %v", need, policy.CapWindow)
	}
	if left := policy.CapWindowLeft(time.Now()); left < need {
		t.Logf("waiting %v for a fresh cap window", left)
		time.Sleep(left + 10*time.Millisecond)
	}
}
