package vllmmetrics

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The vLLM gauges read.
const (
	metricWaiting = "vllm:num_requests_waiting"
	metricRunning = "vllm:num_requests_running"
	metricKVCache = "vllm:kv_cache_usage_perc"
	labelModel    = "model_name"
)

// maxLine bounds one exposition line; vLLM's are far shorter.
const maxLine = 64 << 10

// Gauges are one upstream's load on one model. vLLM reports one series per
// engine (data-parallel rank); Parse sums them, except KVCache, which is
// the highest engine's usage (0 to 1).
type Gauges struct {
	Waiting float64
	Running float64
	KVCache float64
}

// Parse reads the Prometheus text exposition format and returns the
// three vLLM gauges per model_name. Other metrics, comments and series
// without a model_name are skipped. It returns an error only for a
// malformed line of one of the three gauges or an over-long line, so a
// new metric that vLLM adds cannot break a reader.
func Parse(r io.Reader) (map[string]Gauges, error) {
	out := map[string]Gauges{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		name, ok := wanted(line)
		if !ok {
			continue
		}
		model, v, err := parseSample(line[len(name):])
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %s: %w", n, name, err)
		}
		if model == "" {
			continue
		}
		g := out[model]
		switch name {
		case metricWaiting:
			g.Waiting += v
		case metricRunning:
			g.Running += v
		case metricKVCache:
			g.KVCache = max(g.KVCache, v)
		}
		out[model] = g
	}
	return out, sc.Err()
}

// wanted returns the metric name when line is a sample of a gauge read
// here. The name must be followed by '{' or a space, so that e.g.
// vllm:num_requests_waiting_by_reason is not mistaken for it.
func wanted(line string) (string, bool) {
	for _, name := range [...]string{metricWaiting, metricRunning, metricKVCache} {
		if strings.HasPrefix(line, name) && len(line) > len(name) {
			if c := line[len(name)]; c == '{' || c == ' ' || c == '\t' {
				return name, true
			}
		}
	}
	return "", false
}

// parseSample parses `{labels} value [timestamp]` and returns the
// model_name label and the value.
func parseSample(s string) (model string, v float64, err error) {
	if strings.HasPrefix(s, "{") {
		var rest string
		model, rest, err = parseLabels(s[1:])
		if err != nil {
			return "", 0, err
		}
		s = rest
	}
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return "", 0, fmt.Errorf("want `value [timestamp]`, got %q", s)
	}
	v, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, fmt.Errorf("value: %w", err)
	}
	return model, v, nil
}

// parseLabels reads `name="value",...}` (the opening brace consumed) and
// returns the model_name value and what follows the closing brace.
// Values may hold the escapes \\, \" and \n.
func parseLabels(s string) (model, rest string, err error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return model, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", "", fmt.Errorf("malformed label in %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		val, n, err := unquote(s[eq+2:])
		if err != nil {
			return "", "", err
		}
		if name == labelModel {
			model = val
		}
		s = strings.TrimLeft(s[eq+2+n:], " \t")
		s = strings.TrimPrefix(s, ",")
	}
}

// unquote reads a label value up to its closing quote and returns it with
// the number of bytes consumed, quote included.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 == len(s) {
				return "", 0, fmt.Errorf("unterminated escape")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default: // \\ and \" stand for themselves
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated label value")
}
