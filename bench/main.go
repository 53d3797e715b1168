// Command bench measures pacegate's claims against baselines run in the
// same process and the same run, and writes bench/results/<mode>.json,
// SVG plots beside it, and BENCHMARKS.md generated from the JSON.
//
//	go run ./bench [-quick|-full] [-only overhead,pacing,...] [-out bench/results] [-md BENCHMARKS.md]
//	go run ./bench -report bench/results/quick.json   # regenerate BENCHMARKS.md only
//
// It is a top-level main package because it drives the whole process
// from outside (see bench/README.md); nothing imports it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == bareProxyFlag {
		if err := serveBareProxyChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench bare proxy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	full   bool
	only   string
	out    string
	md     string
	report string
	cpu    string
	pprof  string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Bool("quick", true, "quick mode (about 10 min on 2 cores); the default")
	fs.BoolVar(&o.full, "full", false, "full mode: longer runs, more buckets")
	fs.StringVar(&o.only, "only", "", "comma-separated scenario ids to run: "+strings.Join(scenarioIDs(), ","))
	fs.StringVar(&o.out, "out", resultsDir, "directory for <mode>.json and the SVG plots")
	fs.StringVar(&o.md, "md", "", "markdown report to write (default: BENCHMARKS.md for the results in "+resultsDir+
		", BENCHMARKS.md in their directory for others)")
	fs.StringVar(&o.report, "report", "", "only regenerate the markdown from this results JSON")
	fs.StringVar(&o.cpu, "cpuprofile", "", "write a CPU profile of the whole run (gateway, baselines, load) to this file")
	fs.StringVar(&o.pprof, "pprof", "", "write CPU and allocation profiles of the overhead scenario's pacegate process, "+
		"taken through its admin API over one more 64-token round, to this directory")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.md == "" {
		dir := o.out
		if o.report != "" {
			dir = filepath.Dir(o.report)
		}
		o.md = markdownFor(dir)
	}
	return o, nil
}

// resultsDir holds the results BENCHMARKS.md is made from.
const resultsDir = "bench/results"

// markdownFor is where the report of the results in dir goes by default:
// a run written elsewhere (a trial, a comparison) leaves BENCHMARKS.md as
// it is.
func markdownFor(dir string) string {
	if filepath.Clean(dir) == resultsDir {
		return "BENCHMARKS.md"
	}
	return filepath.Join(dir, "BENCHMARKS.md")
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.report != "" {
		r, err := readJSON(o.report)
		if err != nil {
			return err
		}
		return writeMarkdown(o.md, filepath.Dir(o.report), o.report, r)
	}
	selected, err := selectScenarios(o.only)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.cpu != "" {
		stopProfile, err := startCPUProfile(o.cpu)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	e := &env{full: o.full, out: o.out, mode: modeName(o.full), pprof: o.pprof}
	r := runAll(ctx, e, selected, "go run ./bench "+strings.Join(args, " "))
	jsonPath := filepath.Join(o.out, e.mode+".json")
	r = mergeResults(jsonPath, r)
	if err := writeJSON(jsonPath, r); err != nil {
		return err
	}
	return writeMarkdown(o.md, o.out, jsonPath, r)
}

func modeName(full bool) string {
	if full {
		return "full"
	}
	return "quick"
}

// runAll runs the selected scenarios one after another.
func runAll(ctx context.Context, e *env, selected []scenario, command string) *Results {
	r := &Results{Mode: e.mode, Command: strings.TrimSpace(command), Started: time.Now(), Machine: describeMachine()}
	for _, sc := range selected {
		if ctx.Err() != nil {
			break
		}
		res := runOne(ctx, e, sc)
		res.Commit = r.Machine.Commit
		r.Scenarios = append(r.Scenarios, res)
	}
	r.Elapsed = time.Since(r.Started).Round(time.Second).String()
	return r
}

// runOne runs one scenario within its time budget and records its
// outcome; a failing scenario does not stop the others.
func runOne(ctx context.Context, e *env, sc scenario) *ScenarioResult {
	res := &ScenarioResult{ID: sc.id, Title: sc.title, Command: fmt.Sprintf("go run ./bench -%s -only %s", e.mode, sc.id)}
	fmt.Fprintf(os.Stderr, "== %s\n", sc.title)
	start := time.Now()
	res.Started = start
	budget := e.pickD(sc.budgetQuick, sc.budgetFull)
	if rocketmqEndpoint() != "" {
		budget += sc.budgetBroker
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	load := loadAvg()
	if err := sc.run(ctx, e, res); err != nil {
		res.Error = err.Error()
		fmt.Fprintf(os.Stderr, "   error: %v\n", err)
	}
	res.Elapsed = time.Since(start).Round(100 * time.Millisecond).String()
	res.LoadAvg = load + " → " + loadAvg()
	for _, b := range res.Bars {
		fmt.Fprintf(os.Stderr, "   %-46s %-22s %-34s %s\n", b.Claim, b.Target, b.Measured, mark(b.Pass))
	}
	return res
}

// mergeResults keeps the scenarios of an earlier run of the same mode
// that this run did not repeat (so -only updates one section).
func mergeResults(path string, r *Results) *Results {
	old, err := readJSON(path)
	if err != nil {
		return r
	}
	ran := map[string]bool{}
	for _, s := range r.Scenarios {
		ran[s.ID] = true
	}
	var merged []*ScenarioResult
	for _, sc := range scenarios {
		if ran[sc.id] {
			merged = append(merged, find(r.Scenarios, sc.id))
		} else if s := find(old.Scenarios, sc.id); s != nil {
			merged = append(merged, s)
		}
	}
	r.Scenarios = merged
	if len(ran) < len(merged) { // a partial re-run: the header keeps the full run's command
		r.Reruns = append(old.Reruns, r.Command)
		r.Command, r.Started, r.Elapsed, r.Machine = old.Command, old.Started, old.Elapsed, old.Machine
	}
	return r
}

func find(ss []*ScenarioResult, id string) *ScenarioResult {
	for _, s := range ss {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func writeMarkdown(mdPath, outDir, jsonPath string, r *Results) error {
	rel := func(p string) string {
		if x, err := filepath.Rel(filepath.Dir(mdPath), p); err == nil {
			return filepath.ToSlash(x)
		}
		return filepath.ToSlash(p)
	}
	return os.WriteFile(mdPath, renderMarkdown(r, rel(outDir), rel(jsonPath)), 0o644)
}

// startCPUProfile profiles the process until the returned func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
