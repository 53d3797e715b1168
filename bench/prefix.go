package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/gateway/app"
	"github.com/pacegate/pacegate/policy/config"
)

// The prefix scenario's workload: multi-turn conversations, each with a
// long system prompt of its own, in front of replicas with a prefix cache
// that is too small for every conversation on every replica.
const (
	pfxReplicas    = 4
	pfxWorkers     = 32   // conversations at once, one tenant each
	pfxSystemWords = 1000 // each conversation's own system prompt
	pfxTurns       = 6
	pfxTurnWords   = 30
	pfxMaxTokens   = 32    // the mean: each answer is 16 to 48 tokens
	pfxCacheTokens = 12288 // per replica: its share of the conversations (8 of ~1,400 tokens) fits, all 32 do not
	// pfxPauseMax bounds the pause before each follow-up turn in the
	// cases with pauses: uniform in [0, pfxPauseMax), as a client's tool
	// call or its reader takes.
	pfxPauseMax = 500 * time.Millisecond
)

// pfxSim is the simulated replica: a per-token prefill cost that the
// prefix cache saves, and a batch that slows as it fills.
func pfxSim() vllmsim.Config {
	return vllmsim.Config{TTFT: 10 * time.Millisecond, ITL: 5 * time.Millisecond, PrefillPerToken: 200 * time.Microsecond,
		PrefixCacheTokens: pfxCacheTokens, MaxNumSeqs: 16, TimeFactorUnderLoad: 2}
}

// pfxTurn is one answered request of a conversation.
type pfxTurn struct {
	turn           int
	ttft           time.Duration
	prompt, cached int
	err            error
}

// pfxResult is one case of the scenario.
type pfxResult struct {
	name      string
	turns     []pfxTurn
	perUp     []float64         // requests routed to each replica (through the gateway)
	decisions map[string]uint64 // routing decisions (upstream.Decision*), through the gateway
	errors    int
	midStream int // errors after the first token
	completed int
}

func (r *pfxResult) hitRatio() float64 {
	var p, c int
	for _, t := range r.turns {
		p, c = p+t.prompt, c+t.cached
	}
	return ratio(float64(c), float64(p))
}

func (r *pfxResult) followUpTTFT() Summary {
	var xs []float64
	for _, t := range r.turns {
		if t.turn > 0 && t.err == nil {
			xs = append(xs, ms(t.ttft))
		}
	}
	return Summarize(xs)
}

// refilled counts the follow-up turns whose replica reported less than
// half of the prompt cached: their conversation's prefix was not where
// they went, or had been evicted there, and was prefilled again.
func (r *pfxResult) refilled() int {
	n := 0
	for _, t := range r.turns {
		if t.turn > 0 && t.err == nil && 2*t.cached < t.prompt {
			n++
		}
	}
	return n
}

// words is a deterministic text of n words drawn from seed.
func words(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "w%x", rng.Uint32()%50000)
	}
	return b.String()
}

// pfxConversation runs conversations one after another for worker w
// until ctx ends, sending each turn to url(w) and recording it.
// salt makes each case's prompts its own, so that replicas shared by
// the cases (external ones) start each case without its prompts cached.
// With pause, each follow-up turn waits a random time up to pfxPauseMax
// first.
func pfxConversation(ctx context.Context, c *http.Client, w int, salt uint64, shared, pause bool, url func(w int) string, record func(pfxTurn)) {
	rng := rand.New(rand.NewPCG(salt, uint64(w)))
	for conv := 0; ctx.Err() == nil; conv++ {
		seed := salt<<56 | uint64(w)<<20 | uint64(conv)
		system := words(seed, pfxSystemWords)
		if shared {
			system = words(salt<<56|1, pfxSystemWords) + " " + words(seed, 20)
		}
		msgs := []map[string]string{{"role": "system", "content": system}}
		for turn := range pfxTurns {
			if pause && turn > 0 {
				if sleepCtx(ctx, time.Duration(rng.Int64N(int64(pfxPauseMax)))); ctx.Err() != nil {
					return
				}
			}
			msgs = append(msgs, map[string]string{"role": "user", "content": words(seed<<8|uint64(turn), pfxTurnWords)})
			// Answers of one length make the closed loop run in lockstep,
			// and least outstanding then sends most turns back where the
			// last one went by accident; real answers vary.
			answer := pfxMaxTokens/2 + int(seed>>3+uint64(turn)*7919)%(pfxMaxTokens+1)
			body, _ := json.Marshal(map[string]any{"model": simModel, "stream": true, "max_tokens": answer, "ignore_eos": true,
				"stream_options": map[string]bool{"include_usage": true}, "messages": msgs})
			t := pfxPost(ctx, c, url(w), fmt.Sprintf("sk-t%d", w), body)
			t.turn = turn
			if ctx.Err() != nil {
				return // cut by the end of the run: not the system's failure
			}
			record(t)
			if t.err != nil {
				break // a failed conversation starts over
			}
			msgs = append(msgs, map[string]string{"role": "assistant", "content": words(seed<<8|uint64(turn), answer)})
		}
	}
}

// pfxPost sends one streamed turn and reads its TTFT and usage.
func pfxPost(ctx context.Context, c *http.Client, url, key string, body []byte) pfxTurn {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return pfxTurn{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return pfxTurn{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return pfxTurn{err: fmt.Errorf("status %d: %s", resp.StatusCode, b)}
	}
	return pfxRead(resp.Body, start, pfxTurn{})
}

// pfxRead reads an SSE answer: the first content chunk's time and the
// usage chunk's prompt and cached tokens. A stream without [DONE] is an
// error, as the SDKs would see a cut answer.
func pfxRead(r io.Reader, start time.Time, t pfxTurn) pfxTurn {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		switch {
		case ok && bytes.HasPrefix(data, []byte("[DONE]")):
			return t
		case ok && t.ttft == 0 && hasContent(data):
			t.ttft = time.Since(start)
		case ok && bytes.Contains(data, []byte(`"usage":{`)):
			var u struct {
				Usage struct {
					Prompt  int `json:"prompt_tokens"`
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if json.Unmarshal(data, &u) == nil {
				t.prompt, t.cached = u.Usage.Prompt, u.Usage.Details.Cached
			}
		case ok && bytes.Contains(data, []byte(`"error"`)):
			t.err = fmt.Errorf("error event: %s", bytes.TrimSpace(data))
			return t
		}
		if err != nil {
			if t.err == nil {
				t.err = fmt.Errorf("stream ended without [DONE]: %v", err)
			}
			return t
		}
	}
}

// hasContent reports whether a chat chunk carries generated text (the
// role chunk's content is empty), whatever the server's words.
func hasContent(data []byte) bool {
	_, rest, ok := bytes.Cut(data, []byte(`"content":"`))
	return ok && len(rest) > 0 && rest[0] != '"'
}

// pfxRun runs the workload for d against url(w) and collects it.
func pfxRun(ctx context.Context, name string, salt uint64, d time.Duration, shared, pause bool, url func(w int) string, midway func()) *pfxResult {
	res := &pfxResult{name: name}
	var mu sync.Mutex
	record := func(t pfxTurn) {
		mu.Lock()
		defer mu.Unlock()
		res.turns = append(res.turns, t)
		if t.err != nil {
			res.errors++
			if t.ttft > 0 {
				res.midStream++
			}
			return
		}
		res.completed++
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c := newClient(pfxWorkers * 2)
	var wg sync.WaitGroup
	for w := range pfxWorkers {
		wg.Go(func() { pfxConversation(runCtx, c, w, salt, shared, pause, url, record) })
	}
	if midway != nil {
		select {
		case <-time.After(d / 2):
			midway()
		case <-runCtx.Done():
		}
	}
	wg.Wait()
	return res
}

// pfxGateway starts pacegate in front of upstreams with routing policy
// (everything else at its defaults: no max_concurrency, no fairness
// settings).
func pfxGateway(ctx context.Context, upstreams []string, policy string) (*pacegate, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:0\"\nmodels: [%s]\nupstreams:\n", simModel)
	for _, u := range upstreams {
		fmt.Fprintf(&b, "  - {url: %q, models: [%s]}\n", u, simModel)
	}
	fmt.Fprintf(&b, "routing: {policy: %s}\ntenants:\n", policy)
	for i := range pfxWorkers {
		fmt.Fprintf(&b, "  - {id: t%d, keys: [\"sk-t%d\"]}\n", i, i)
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	a, err := app.New(cfg, app.Options{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	if err := a.Start(runCtx); err != nil {
		cancel()
		return nil, err
	}
	g := &pacegate{App: a, cancel: cancel}
	return g, g.waitReady(ctx)
}

// pfxUpstreamsEnv names the replicas started by hand, comma-separated.
const pfxUpstreamsEnv = "PACEGATE_BENCH_PREFIX_UPSTREAMS"

// pfxUpstreams are the replicas: PACEGATE_BENCH_PREFIX_UPSTREAMS (four
// URLs of servers started by hand, e.g. another simulator) or four
// vllmsims of pfxSim started here (closed by the returned func).
func pfxUpstreams() (urls []string, sims []*upstreamSim, external bool, err error) {
	if v := os.Getenv(pfxUpstreamsEnv); v != "" {
		urls = strings.Split(v, ",")
		if len(urls) != pfxReplicas {
			return nil, nil, true, fmt.Errorf("%s: want %d URLs, got %d", pfxUpstreamsEnv, pfxReplicas, len(urls))
		}
		return urls, nil, true, nil
	}
	for range pfxReplicas {
		s, err := startSim(pfxSim(), false)
		if err != nil {
			return nil, nil, false, err
		}
		sims = append(sims, s)
		urls = append(urls, s.URL)
	}
	return urls, sims, false, nil
}
