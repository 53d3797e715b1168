package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Machine describes where the run happened.
type Machine struct {
	NProc      int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Memory     string `json:"memory"`
	CPU        string `json:"cpu"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Commit     string `json:"commit"`
}

func describeMachine() Machine {
	return Machine{
		NProc:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Memory:     procField("/proc/meminfo", "MemTotal"),
		CPU:        procField("/proc/cpuinfo", "model name"),
		Go:         runtime.Version(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		Commit:     gitCommit(),
	}
}

// procField returns the value of the first "name: value" line of a
// /proc file, or "unknown".
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// gitCommit returns the short HEAD commit, with "+dirty" when the work
// tree has changes, or "unknown" outside a checkout. The harness's own
// outputs (BENCHMARKS.md, bench/results) do not count: a run rewrites
// them, and the build it measures is the same.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain", "--", ".", ":!BENCHMARKS.md", ":!"+resultsDir).Output()
	if err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

// loadAvg returns the 1-minute load average from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
