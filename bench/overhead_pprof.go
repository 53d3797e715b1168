package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ohProfiler takes profiles of the overhead scenario's pacegate process
// through its admin API's /debug/pprof (`-pprof DIR`): the process the
// scenario measures, as an operator would profile it, not a build of
// the harness's own.
type ohProfiler struct {
	dir   string // where the profiles go
	admin *ohAdmin
}

// ohProfileDur is the profiled round's length. The rounds' load is light
// (32 streams, each at the sim's pace): a round of 10 s gave a CPU
// profile of 25 samples, too few to say where a request's time goes.
const ohProfileDur = 40 * time.Second

// profileRound runs one more CPU round of kind k through pg alone, not
// counted in the results (the profiler's own cost is in it), with a CPU
// profile of pg over the round; then it fetches pg's allocation profile
// (every allocation since the process started, all rounds included).
// The round is outside the scenario's budget, which is the measured
// rounds', and bounded by its own.
func (p *ohProfiler) profileRound(ctx context.Context, pg *child, k ohProcKind) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ohProfileDur+time.Minute)
	defer cancel()
	secs := strconv.Itoa(int((ohProfileDur - time.Second) / time.Second)) // within the round
	cpu := make(chan error, 1)
	go func() { cpu <- p.fetch(ctx, "profile?seconds="+secs, "pacegate-cpu.pprof") }()
	ohMeasureCPU(ctx, pg, ohProfileDur, k)
	if err := <-cpu; err != nil {
		return err
	}
	return p.fetch(ctx, "allocs", "pacegate-allocs.pprof")
}

// fetch writes the profile at /debug/pprof/<what> to the file name in
// p.dir.
func (p *ohProfiler) fetch(ctx context.Context, what, name string) error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	return p.admin.get(ctx, "/debug/pprof/"+what, func(r io.Reader) error {
		f, err := os.Create(filepath.Join(p.dir, name))
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}
