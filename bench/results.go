package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// Results is one run of the harness: what bench/results/<mode>.json
// holds and what BENCHMARKS.md is generated from.
type Results struct {
	Mode      string            `json:"mode"`
	Command   string            `json:"command"`
	Started   time.Time         `json:"started"`
	Elapsed   string            `json:"elapsed"`
	Machine   Machine           `json:"machine"`
	Scenarios []*ScenarioResult `json:"scenarios"`
	// Reruns lists the -only commands merged in after the full run.
	Reruns []string `json:"reruns,omitempty"`
}

// ScenarioResult is what one scenario measured.
type ScenarioResult struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Command  string   `json:"command"`            // re-runs just this scenario
	Setup    string   `json:"setup"`              // what ran, through which path
	Baseline string   `json:"baseline,omitempty"` // what the figures are compared with
	Bars     []Bar    `json:"bars,omitempty"`
	Tables   []Table  `json:"tables,omitempty"`
	Plots    []Plot   `json:"plots,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Skipped  string   `json:"skipped,omitempty"` // why it did not run
	Error    string   `json:"error,omitempty"`   // why it failed
	Elapsed  string   `json:"elapsed"`
	// Commit and Started are the build and the time the scenario ran
	// on: a partial re-run's differ from the header's full run.
	Commit  string    `json:"commit,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// LoadAvg is the machine's 1-minute load average at the start and
	// the end of the scenario (other processes share the cores).
	LoadAvg string `json:"loadavg"`
	// Metrics are the headline numbers by name, for machines.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Bar is one claim checked against its target.
type Bar struct {
	Claim    string `json:"claim"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
}

// Table is a small result table.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Plot is an SVG written next to the JSON.
type Plot struct {
	File    string `json:"file"` // base name under the results directory
	Caption string `json:"caption"`
}

// bar appends a checked claim.
func (s *ScenarioResult) bar(claim, target, measured string, pass bool) {
	s.Bars = append(s.Bars, Bar{Claim: claim, Target: target, Measured: measured, Pass: pass})
}

// note appends a free-text note.
func (s *ScenarioResult) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// metric records a headline number; NaN and Inf become -1 so the JSON
// stays valid.
func (s *ScenarioResult) metric(name string, v float64) {
	if s.Metrics == nil {
		s.Metrics = map[string]float64{}
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = -1
	}
	s.Metrics[name] = v
}

// writeJSON writes r to path.
func writeJSON(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readJSON reads results written by writeJSON.
func readJSON(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(Results)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// f1, f2, f3 format a float with 1–3 decimals.
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func f3(v float64) string { return fmt.Sprintf("%.3f", v) }

// pct formats a fraction as a percentage.
func pct(v float64) string { return fmt.Sprintf("%.2f %%", 100*v) }
