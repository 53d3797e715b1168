//go:build !linux

package consume_test

import "testing"

// keepAwake needs Linux's SCHED_IDLE: elsewhere the "-awake" runs skip.
func keepAwake(b *testing.B) (stop func()) {
	b.Skip("keeping CPUs awake needs Linux's SCHED_IDLE")
	return func() {}
}

// spinIfAsked has nothing to do where keepAwake skips.
func spinIfAsked() {}
