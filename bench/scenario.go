package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// scenario is one benchmark: it measures, and fills res.
type scenario struct {
	id, title               string
	budgetQuick, budgetFull time.Duration // hard time limit of the whole scenario
	budgetBroker            time.Duration // added to it when PACEGATE_ROCKETMQ_ENDPOINT is set
	run                     func(ctx context.Context, e *env, res *ScenarioResult) error
}

// scenarios in report order.
var scenarios = []scenario{
	{"overhead", "1. Overhead", 360 * time.Second, 10 * time.Minute, 0, runOverhead},
	{"pacing", "2. Pacing precision", 45 * time.Second, 3 * time.Minute, 0, runPacing},
	{"isolation", "3. Isolation of throttled tenants", 60 * time.Second, 3 * time.Minute, 0, runIsolation},
	{"throttling", "4. Throttling ratio (the headline)", 120 * time.Second, 6 * time.Minute, 0, runThrottling},
	{"scale", "5. Scale", 45 * time.Second, 4 * time.Minute, 0, runScale},
	{"disconnect", "6. Disconnect", 30 * time.Second, 2 * time.Minute, 0, runDisconnect},
	{"rocketmq", "7. RocketMQ backend", 60 * time.Second, 4 * time.Minute, 0, runRocketMQ},
	{"rocketmq-scale", "7b. RocketMQ at scale", 4 * time.Minute, 8 * time.Minute, 0, runRocketMQScale},
	{"fairness", "8. Fair sharing of a saturated pool", 240 * time.Second, 8 * time.Minute, 2 * time.Minute, runFairness},
	{"prefix", "9. KV-cache-aware routing", 4 * time.Minute, 8 * time.Minute, 0, runPrefix},
	{"replicas", "10. Exact caps and rates across replicas (shared Redis)", 150 * time.Second, 5 * time.Minute, 0, runReplicas},
}

func scenarioIDs() []string {
	ids := make([]string, len(scenarios))
	for i, s := range scenarios {
		ids[i] = s.id
	}
	return ids
}

// selectScenarios returns the scenarios named in only (all when empty).
func selectScenarios(only string) ([]scenario, error) {
	if only == "" {
		return scenarios, nil
	}
	var out []scenario
	for _, id := range strings.Split(only, ",") {
		id = strings.TrimSpace(id)
		i := indexOf(id)
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", id, strings.Join(scenarioIDs(), ", "))
		}
		out = append(out, scenarios[i])
	}
	return out, nil
}

func indexOf(id string) int {
	for i, s := range scenarios {
		if s.id == id {
			return i
		}
	}
	return -1
}

// env is what every scenario gets: the mode and where to write plots.
type env struct {
	full  bool
	mode  string
	out   string
	pprof string // -pprof: where the overhead scenario's process profiles go; "" = none
}

// pick returns quick or full by mode.
func (e *env) pick(quick, full int) int {
	if e.full {
		return full
	}
	return quick
}

func (e *env) pickD(quick, full time.Duration) time.Duration {
	if e.full {
		return full
	}
	return quick
}

// plot writes svg as <out>/<name>.svg and lists it in res.
func (e *env) plot(res *ScenarioResult, name, caption string, svg []byte) {
	file := e.mode + "-" + name + ".svg"
	if err := os.WriteFile(filepath.Join(e.out, file), svg, 0o644); err != nil {
		res.note("plot %s not written: %v", file, err)
		return
	}
	res.Plots = append(res.Plots, Plot{File: file, Caption: caption})
}
