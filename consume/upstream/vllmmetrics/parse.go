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
	// metricCache is an info metric: its labels carry the KV cache's
	// size, in blocks of block_size tokens.
	metricCache = "vllm:cache_config_info"
	labelModel  = "model_name"
	// The inter-token latency histogram's sum (seconds) and count
	// (tokens), and the same under its name before vLLM 0.11 (hidden
	// since 0.12): how long a step of the running batch takes.
	metricITLSum      = "vllm:inter_token_latency_seconds_sum"
	metricITLCount    = "vllm:inter_token_latency_seconds_count"
	metricOldITLSum   = "vllm:time_per_output_token_seconds_sum"
	metricOldITLCount = "vllm:time_per_output_token_seconds_count"
)

// maxCacheTokens bounds a reported cache size (a label is any string).
const maxCacheTokens = 1 << 40

// maxLine bounds one exposition line; vLLM's are far shorter.
const maxLine = 64 << 10

// Gauges are one upstream's load on one model. vLLM reports one series per
// engine (data-parallel rank); Parse sums them, except KVCache, which is
// the highest engine's usage (0 to 1).
type Gauges struct {
	Waiting float64
	Running float64
	KVCache float64
	// ITLSeconds and ITLTokens are the inter-token latency histogram's
	// sum and count since the server started: between two readings,
	// their differences are the mean time between two tokens of a
	// stream. Both 0 when the server reports neither name.
	ITLSeconds float64
	ITLTokens  float64
}

// Reading is what one /metrics response says.
type Reading struct {
	// Models holds the three gauges per model_name.
	Models map[string]Gauges
	// CacheTokens is the KV cache's size in tokens, num_gpu_blocks ×
	// block_size of vllm:cache_config_info (the largest engine's); 0
	// when the server does not say.
	CacheTokens int64
}

// Parse reads the Prometheus text exposition format and returns the
// three vLLM gauges per model_name and the cache's size. Other metrics,
// comments and gauge series without a model_name are skipped. It returns
// an error only for a malformed line of one of the metrics read or an
// over-long line, so a new metric that vLLM adds cannot break a reader;
// cache labels that are not positive integers are ignored.
func Parse(r io.Reader) (Reading, error) {
	out := Reading{Models: map[string]Gauges{}}
	old := map[string]Gauges{} // the ITL under its pre-0.11 name
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		name, ok := wanted(line)
		if !ok {
			continue
		}
		l, v, err := parseSample(line[len(name):])
		if err != nil {
			return Reading{}, fmt.Errorf("metrics line %d: %s: %w", n, name, err)
		}
		if name == metricCache {
			out.CacheTokens = max(out.CacheTokens, l.cacheTokens())
			continue
		}
		model := l.model
		if model == "" {
			continue
		}
		if name == metricOldITLSum || name == metricOldITLCount {
			o := old[model]
			addITL(&o, name == metricOldITLSum, v)
			old[model] = o
			continue
		}
		g := out.Models[model]
		switch name {
		case metricWaiting:
			g.Waiting += v
		case metricRunning:
			g.Running += v
		case metricKVCache:
			g.KVCache = max(g.KVCache, v)
		case metricITLSum, metricITLCount:
			addITL(&g, name == metricITLSum, v)
		}
		out.Models[model] = g
	}
	if err := sc.Err(); err != nil {
		return Reading{}, err
	}
	fallBackToOldITL(out.Models, old)
	return out, nil
}

func addITL(g *Gauges, sum bool, v float64) {
	if sum {
		g.ITLSeconds += v
	} else {
		g.ITLTokens += v
	}
}

// fallBackToOldITL takes the pre-0.11 histogram of a model that reports
// no inter_token_latency (a server that reports both counts the same
// tokens twice).
func fallBackToOldITL(models, old map[string]Gauges) {
	for model, o := range old {
		g, ok := models[model]
		if ok && g.ITLTokens > 0 {
			continue
		}
		g.ITLSeconds, g.ITLTokens = o.ITLSeconds, o.ITLTokens
		models[model] = g
	}
}

// wanted returns the metric name when line is a sample of a gauge read
// here. The name must be followed by '{' or a space, so that e.g.
// vllm:num_requests_waiting_by_reason is not mistaken for it.
func wanted(line string) (string, bool) {
	for _, name := range [...]string{metricWaiting, metricRunning, metricKVCache, metricCache,
		metricITLSum, metricITLCount, metricOldITLSum, metricOldITLCount} {
		if strings.HasPrefix(line, name) && len(line) > len(name) {
			if c := line[len(name)]; c == '{' || c == ' ' || c == '\t' {
				return name, true
			}
		}
	}
	return "", false
}

// labels are the labels read of a sample.
type labels struct {
	model                string // model_name
	blockSize, gpuBlocks string // block_size, num_gpu_blocks
}

// cacheTokens is num_gpu_blocks × block_size, or 0 unless both are
// positive integers and the product is below maxCacheTokens.
func (l labels) cacheTokens() int64 {
	size, err1 := strconv.ParseInt(l.blockSize, 10, 64)
	blocks, err2 := strconv.ParseInt(l.gpuBlocks, 10, 64)
	if err1 != nil || err2 != nil || size <= 0 || blocks <= 0 || blocks > maxCacheTokens/size {
		return 0
	}
	return size * blocks
}

// parseSample parses `{labels} value [timestamp]` and returns the
// labels read and the value.
func parseSample(s string) (l labels, v float64, err error) {
	if strings.HasPrefix(s, "{") {
		var rest string
		l, rest, err = parseLabels(s[1:])
		if err != nil {
			return labels{}, 0, err
		}
		s = rest
	}
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return labels{}, 0, fmt.Errorf("want `value [timestamp]`, got %q", s)
	}
	v, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return labels{}, 0, fmt.Errorf("value: %w", err)
	}
	return l, v, nil
}

// parseLabels reads `name="value",...}` (the opening brace consumed) and
// returns the labels read and what follows the closing brace. Values may
// hold the escapes \\, \" and \n.
func parseLabels(s string) (l labels, rest string, err error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return l, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return labels{}, "", fmt.Errorf("malformed label in %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		val, n, err := unquote(s[eq+2:])
		if err != nil {
			return labels{}, "", err
		}
		switch name {
		case labelModel:
			l.model = val
		case "block_size":
			l.blockSize = val
		case "num_gpu_blocks":
			l.gpuBlocks = val
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
