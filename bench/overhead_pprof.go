package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
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
	admin string // the process's admin API, http://host:port
	token string
}

// newOhProfiler returns a profiler writing to dir, with the environment
// that turns the process's admin API on at a free address.
func newOhProfiler(dir string) (*ohProfiler, []string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	p := &ohProfiler{dir: dir, admin: "http://" + addr, token: rand.Text()}
	return p, []string{"PACEGATE_ADMIN_LISTEN=" + addr, "PACEGATE_ADMIN_TOKEN=" + p.token}, nil
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
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.admin+"/debug/pprof/"+what, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET /debug/pprof/%s: %s %s", what, resp.Status, b)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(p.dir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
