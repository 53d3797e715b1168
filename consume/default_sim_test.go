package consume_test

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// The fairness targets of the default, in virtual time: no fairness
// settings (fair mode, no headroom, no reserve) on a pool whose limit is
// the server's room, 10 sequences, as the upstream pool learns it from
// vLLM's metrics, and whose batch slows as it fills (twice as slow per
// token when full). Clients are closed loop with no pause.
var (
	defaultPool = simSetup{mode: consume.CapacityFair, limit: 10, slow: 2}
	pollPool    = simSetup{mode: consume.CapacityPoll, limit: 10, slow: 2}
)

const (
	simWarm = 5 * time.Second
	simRunD = 35 * time.Second
)

func poolTokens(res map[string]*simResult) (tokens int) {
	for _, r := range res {
		tokens += r.tokens
	}
	return tokens
}

// The noisy neighbour: beside a tenant that keeps 32 long requests going,
// three light tenants of two clients each get their first token within
// 1.5× of their figure alone, and the pool makes at least 0.95× the
// tokens of the old poll.
func TestDefaultNoisyNeighbour(t *testing.T) {
	light := []simTenant{{"a", 1, 1, 2, 32, 0}, {"b", 1, 1, 2, 32, 0}, {"c", 1, 1, 2, 32, 0}}
	loaded := append([]simTenant{{"heavy", 1, 1, 32, 256, 0}}, light...)
	lightP99 := func(res map[string]*simResult) (worst time.Duration) {
		for _, tn := range light {
			worst = max(worst, p99(res[tn.name].ttft))
		}
		return worst
	}
	alone := simRun(t, defaultPool, light, simWarm, simRunD)
	fair := simRun(t, defaultPool, loaded, simWarm, simRunD)
	poll := simRun(t, pollPool, loaded, simWarm, simRunD)
	t.Logf("light TTFT p99: alone %v, default %v, poll %v; pool tokens: default %d, poll %d",
		lightP99(alone), lightP99(fair), lightP99(poll), poolTokens(fair), poolTokens(poll))
	if got, want := lightP99(fair), lightP99(alone)*3/2; got > want || got == 0 {
		t.Errorf("light TTFT p99 %v, want ≤ 1.5× alone (%v)", got, want)
	}
	if got, want := poolTokens(fair), poolTokens(poll)*95/100; got < want {
		t.Errorf("pool tokens %d, want ≥ 0.95× poll's %d", got, want)
	}
}

// A high tenant beside normal and low tenants that saturate the pool gets
// its first token within 1.25× of its figure alone.
func TestDefaultHighBand(t *testing.T) {
	hi := []simTenant{{"hi", 1, 0, 2, 32, 0}}
	loaded := append([]simTenant{{"norm", 1, 1, 16, 256, 0}, {"lo", 1, 2, 16, 256, 0}}, hi...)
	alone := simRun(t, defaultPool, hi, simWarm, simRunD)
	fair := simRun(t, defaultPool, loaded, simWarm, simRunD)
	t.Logf("high TTFT p99: alone %v, default %v", p99(alone["hi"].ttft), p99(fair["hi"].ttft))
	if got, want := p99(fair["hi"].ttft), p99(alone["hi"].ttft)*5/4; got > want || got == 0 {
		t.Errorf("high TTFT p99 %v, want ≤ 1.25× alone (%v)", got, want)
	}
}

// Two backlogged tenants of equal weight, one of 8× longer answers and
// fewer clients, get completion tokens within 15 % of each other.
func TestDefaultMixedLengths(t *testing.T) {
	tenants := []simTenant{{"long", 1, 1, 12, 512, 0}, {"short", 1, 1, 24, 64, 0}}
	res := simRun(t, defaultPool, tenants, 10*time.Second, 130*time.Second)
	l, s := float64(res["long"].tokens), float64(res["short"].tokens)
	t.Logf("completion tokens: long %v, short %v", l, s)
	if off := l/s - 1; max(off, -off) > 0.15 {
		t.Errorf("long got %v tokens, short %v: %.1f %% apart, want within 15 %%", l, s, 100*off)
	}
}

// Weights 1 : 2 : 4, all backlogged: each within 5 % of its share. The
// scheduler's lag behind the exact shares is bounded in tokens, not in
// time (up to about 1,600 of w1's, six of its requests, depending on the
// order of simultaneous events): over 180 s that was up to 6 % of w1's
// share, over 560 s it is under 2.5 %.
func TestDefaultWeights(t *testing.T) {
	tenants := []simTenant{{"w1", 1, 1, 12, 256, 0}, {"w2", 2, 1, 12, 256, 0}, {"w4", 4, 1, 12, 256, 0}}
	res := simRun(t, defaultPool, tenants, 10*time.Second, 570*time.Second)
	total := poolTokens(res)
	for _, tn := range tenants {
		want := float64(total) * tn.weight / 7
		if off := float64(res[tn.name].tokens)/want - 1; max(off, -off) > 0.05 {
			t.Errorf("%s got %d tokens, %.1f %% off its weight's share %.0f", tn.name, res[tn.name].tokens, 100*off, want)
		}
	}
}
