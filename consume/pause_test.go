package consume

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// pausingBackend is a wakeable fake that honours SuccessThenPause.
type pausingBackend struct{ wakeableBackend }

func (*pausingBackend) PausesAfterSuccess() {}

// nextIn is a pacer whose slot has come for the first request, and
// whose next slot is d away once it is taken: Handle asks WaitAt, then
// AcquireOrSuspendAt (the release), and both are this function.
func nextIn(d time.Duration) fakePacer {
	calls := 0
	return func(policy.Key, float64) time.Duration {
		if calls++; calls > 2 {
			return d
		}
		return 0
	}
}

// A release that leaves requests waiting in its bucket pauses the
// bucket's LiteTopic until its next slot, recorded as a pace suspension,
// instead of having the next request delivered only to be suspended.
func TestAReleaseWithABacklogPausesItsBucket(t *testing.T) {
	r := newRigOn(&pausingBackend{wakeableBackend{fakeBackend{min: time.Millisecond}}}, nextIn(40*time.Millisecond), CapacityFair)
	d, p := r.submit(context.Background(), "acme")
	r.submit(context.Background(), "acme")
	if res := r.c.Handle(context.Background(), d); res != SuccessThenPause(40*time.Millisecond) {
		t.Fatalf("got %v, want success, pause(40ms)", res)
	}
	collect(t, p)
	if got, want := r.obs.events(), []string{"released acme", "suspended acme 40ms pace"}; !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
	if st, _ := r.q.Stat(r.key); st.State != StateSuspended || st.Backlog != 1 || st.Suspends != 1 || st.Released != 1 {
		t.Fatalf("bucket %+v", st)
	}
	r.c.Close(context.Background())
}

// No pause when it would change nothing or cannot be kept: the bucket's
// last request, a next slot closer than the backend's MinSuspend (the
// next delivery waits that out itself), a backend that does not pause.
func TestAReleasePausesOnlyWhereItSavesADelivery(t *testing.T) {
	cases := []struct {
		name     string
		backend  Backend
		requests int
	}{
		{"the bucket's last request", &pausingBackend{wakeableBackend{fakeBackend{min: time.Millisecond}}}, 1},
		{"a slot within MinSuspend", &pausingBackend{wakeableBackend{fakeBackend{min: 50 * time.Millisecond}}}, 2},
		{"a backend that cannot pause", &wakeableBackend{fakeBackend{min: time.Millisecond}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRigOn(c.backend, nextIn(40*time.Millisecond), CapacityFair)
			d, p := r.submit(context.Background(), "acme")
			for range c.requests - 1 {
				r.submit(context.Background(), "acme")
			}
			if res := r.c.Handle(context.Background(), d); res != Success() {
				t.Fatalf("got %v, want success", res)
			}
			collect(t, p)
			if got, want := r.obs.events(), []string{"released acme"}; !slices.Equal(got, want) {
				t.Fatalf("observed %q, want %q", got, want)
			}
			r.c.Close(context.Background())
		})
	}
}
