package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRenderMarkdown(t *testing.T) {
	s := &ScenarioResult{ID: "overhead", Title: "1. Overhead", Command: "go run ./bench -quick -only overhead",
		Setup: "setup text", Baseline: "bare proxy", Commit: "abc1234", Started: time.Date(2026, 12, 6, 7, 5, 0, 0, time.UTC),
		Elapsed: "4m0s", LoadAvg: "0.5 → 0.9"}
	s.bar("throughput", "≥ 0.8× bare", "0.95×", true)
	s.bar("TTFT | p99", "< 2 ms", "3 ms", false)
	s.Tables = []Table{{Title: "rounds", Header: []string{"a", "b"}, Rows: [][]string{{"1", "2"}}}}
	s.Plots = []Plot{{File: "x.svg", Caption: "cap"}}
	s.note("note %d", 1)
	skipped := &ScenarioResult{ID: "rocketmq", Title: "7. RocketMQ", Skipped: "no broker"}
	r := &Results{Mode: "quick", Command: "go run ./bench -quick", Started: time.Unix(0, 0),
		Machine: Machine{NProc: 2, CPU: "cpu"}, Scenarios: []*ScenarioResult{s, skipped},
		Reruns: []string{"go run ./bench -quick -only overhead", "go run ./bench -quick -only overhead", "go run ./bench -quick -only pacing"}}
	md := string(renderMarkdown(r, "bench/results", "bench/results/quick.json"))
	for _, want := range []string{
		"| 1. Overhead | throughput | ≥ 0.8× bare | 0.95× | ✓ |",
		"TTFT \\| p99", "✗ missed", "![cap](bench/results/x.svg)", "- note 1",
		"**Baseline:** bare proxy", "skipped: no broker", "| a | b |\n|---|---|\n| 1 | 2 |",
		"Command: `go run ./bench -quick -only overhead` (commit abc1234, started 2026-12-06 07:05 UTC; elapsed 4m0s; " +
			"1-min load average 0.5 → 0.9 on this machine)",
		"| re-run since | `go run ./bench -quick -only overhead` (2 times) |\n| re-run since | `go run ./bench -quick -only pacing` |\n\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n%s", want, md)
		}
	}
}

// A run whose results go elsewhere (a trial, a comparison) writes its
// report beside them; only the results in bench/results make
// BENCHMARKS.md, unless -md says otherwise.
func TestMarkdownDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "BENCHMARKS.md"},
		{[]string{"-out", "bench/results/"}, "BENCHMARKS.md"},
		{[]string{"-out", "/tmp/trial"}, "/tmp/trial/BENCHMARKS.md"},
		{[]string{"-out", "/tmp/trial", "-md", "x.md"}, "x.md"},
		{[]string{"-report", "bench/results/quick.json"}, "BENCHMARKS.md"},
		{[]string{"-report", "/tmp/trial/quick.json"}, "/tmp/trial/BENCHMARKS.md"},
	} {
		o, err := parseFlags(c.args)
		if err != nil || o.md != c.want {
			t.Errorf("%v: md %q (%v), want %q", c.args, o.md, err, c.want)
		}
	}
}

// A partial re-run keeps the full run's header, its build included, and
// records its own build and time in the scenario it ran.
func TestMergeKeepsTheFullRunsHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quick.json")
	full := &Results{Mode: "quick", Command: "go run ./bench -quick", Started: time.Unix(100, 0), Elapsed: "10m",
		Machine: Machine{Commit: "aaaaaaa"}, Scenarios: []*ScenarioResult{{ID: "overhead", Commit: "aaaaaaa"}, {ID: "pacing"}}}
	if err := writeJSON(path, full); err != nil {
		t.Fatal(err)
	}
	re := &Results{Mode: "quick", Command: "go run ./bench -quick -only overhead", Started: time.Unix(200, 0),
		Machine: Machine{Commit: "bbbbbbb"}, Scenarios: []*ScenarioResult{{ID: "overhead", Commit: "bbbbbbb"}}}
	r := mergeResults(path, re)
	if r.Command != full.Command || r.Machine.Commit != "aaaaaaa" || !r.Started.Equal(full.Started) ||
		!slices.Equal(r.Reruns, []string{"go run ./bench -quick -only overhead"}) {
		t.Errorf("header: %q, commit %s, started %v, reruns %q", r.Command, r.Machine.Commit, r.Started, r.Reruns)
	}
	if len(r.Scenarios) != 2 || r.Scenarios[0].Commit != "bbbbbbb" || r.Scenarios[1].ID != "pacing" {
		t.Errorf("scenarios: %+v", r.Scenarios)
	}
}
