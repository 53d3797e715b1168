package main

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestStatusSwitches(t *testing.T) {
	status := []byte("Name:\tpacegate\nThreads:\t7\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n")
	if got := statusSwitches(status); got != 15 {
		t.Errorf("statusSwitches = %d, want 15", got)
	}
}

// The test binary's threads have switched by the time it runs a test.
func TestProcSwitchesOfThisProcess(t *testing.T) {
	n, err := procSwitches(os.Getpid())
	if err != nil || n <= 0 {
		t.Errorf("procSwitches(self) = %d, %v; want > 0", n, err)
	}
}

// Rounds on two parallel lines, 10 µs of CPU per switch, pacegate 200 µs
// above the bare proxy: the fit finds both, and the ratio at the rounds'
// mean switches, whatever each round's own count.
func TestOhSwitchFit(t *testing.T) {
	k := ohProcKind{256, true}
	round := func(base float64, sw int64) ohProcRound {
		const ok = 100
		perReq := base + 10*float64(sw)
		return ohProcRound{kind: k, ok: ok, switches: sw * ok, cpu: time.Duration(perReq * ok * float64(time.Microsecond))}
	}
	cpuB := []ohProcRound{round(1000, 150), round(1000, 300), round(1000, 200)}
	cpuP := []ohProcRound{round(1200, 250), round(1200, 180), round(1200, 220)}
	f, ok := ohSwitchFit(cpuB, cpuP, k)
	mean := (150 + 300 + 200 + 250 + 180 + 220) / 6.0
	want := (1200 + 10*mean) / (1000 + 10*mean)
	if !ok || math.Abs(f.perSwitch-10) > 1e-6 || math.Abs(f.atEqual-want) > 1e-9 || f.pg != 220 || f.bare != 200 {
		t.Errorf("ohSwitchFit = %+v, %v; want 10 µs a switch, %.4f× at equal switches, medians 220 and 200", f, ok, want)
	}
	if _, ok := ohSwitchFit(cpuB[:1], cpuP[:1], k); ok {
		t.Error("one round: want no fit")
	}
}
