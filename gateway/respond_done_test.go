package gateway

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// A stream's [DONE] goes out with its last chunk, while the call still
// drains its upstream. The client has the whole answer then, and may
// leave at once; whatever ends the request before the call does (the
// client leaving, the timeout, the cut) ends a stream that succeeded:
// its outcome is ok, and nothing follows [DONE].
func TestAStreamWhoseDoneWentOutEndsOK(t *testing.T) {
	const whole = "data: {\"fin\":1}\n\ndata: [DONE]\n\n"
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		end     func(r *rig, leave context.CancelFunc)
	}{
		{"the client leaves", 0, func(_ *rig, leave context.CancelFunc) { leave() }},
		{"the timeout passes", 2 * time.Second, func(*rig, context.CancelFunc) { time.Sleep(2 * time.Second) }},
		{"the cut", 0, func(r *rig, _ context.CancelFunc) { r.s.Cut() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, tc.timeout, header, framed(`{"fin":1}`, false, true), consume.Event{Kind: consume.EventDone})
				r.up.hang = true // the upstream's body never ends: the call drains it
				obs := &outcomeRecorder{Observer: nopObserver{}}
				r.s.cfg.Observer = obs
				ctx, leave := context.WithCancel(context.Background())
				done := make(chan string)
				go func() { done <- r.do(ctx, streamReq).Body.String() }()
				synctest.Wait() // the last chunk and [DONE] are out
				tc.end(r, leave)
				if got := <-done; got != whole {
					t.Errorf("body %q, want %q", got, whole)
				}
				if got := obs.recorded(); !slices.Equal(got, []string{OutcomeOK}) {
					t.Errorf("outcomes %q, want [%s]", got, OutcomeOK)
				}
				r.close()
			})
		})
	}
}

// An upstream call that fails after the stream's [DONE] went out (its
// body breaks while it drains) fails nothing the client asked for.
func TestAnErrorAfterDoneEndsOK(t *testing.T) {
	r := newRig(t, 0, header, framed(`{"fin":1}`, false, true), consume.Event{Kind: consume.EventError, Err: errors.New("upstream: the body broke")})
	defer r.close()
	obs := &outcomeRecorder{Observer: nopObserver{}}
	r.s.cfg.Observer = obs
	if got, want := r.do(context.Background(), streamReq).Body.String(), "data: {\"fin\":1}\n\ndata: [DONE]\n\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	if got := obs.recorded(); !slices.Equal(got, []string{OutcomeOK}) {
		t.Errorf("outcomes %q, want [%s]", got, OutcomeOK)
	}
}
