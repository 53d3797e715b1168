package main

import (
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
