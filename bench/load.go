package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// newClient returns an HTTP client for the load generator: keep-alive
// with enough idle connections for every worker, no compression, no
// timeout (every call carries a context deadline instead).
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// streamTrace is what one streamed completion looked like from the
// client's side.
type streamTrace struct {
	Start  time.Time
	Status int
	ReqID  string        // X-Request-Id of the response (or the one sent)
	TTFT   time.Duration // to the first content chunk
	Chunks []time.Time   // receive time of every content chunk
	// Completion is a JSON answer's usage.completion_tokens (0 for a
	// stream, or a body without it).
	Completion int
	End        time.Time
	Err        error
}

// chatBody is an OpenAI chat completion request body.
func chatBody(model string, maxTokens int, stream bool) []byte {
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"hello"}],"max_tokens":%d,"stream":%t}`,
		model, maxTokens, stream)
}

// contentMark is how a content chunk of the simulated vLLM is told from
// the role and finish chunks: its tokens are "tok<i>".
var contentMark = []byte(`"content":"tok`)

// contentChunk says whether a stream's data line carries generated text:
// a "content" member that is not empty (the role and finish chunks'
// are), whatever the text is, so that a simulator other than vllmsim
// (whose tokens are tok<i>, contentMark) is counted too.
func contentChunk(line []byte) bool {
	i := bytes.Index(line, quotedContent)
	return i >= 0 && i+len(quotedContent) < len(line) && line[i+len(quotedContent)] != '"'
}

var quotedContent = []byte(`"content":"`)

// doStream posts body to url+path and reads the SSE answer, timestamping
// each content chunk. reqID, if set, is sent as X-Request-Id (the bare
// proxy forwards it; pacegate replaces it with its own and returns that).
// A non-200 answer is read whole and returned with its status.
func doStream(ctx context.Context, c *http.Client, url, key, reqID string, body []byte) streamTrace {
	tr := streamTrace{Start: time.Now(), ReqID: reqID}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tr.Err = err
		return tr
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if reqID != "" {
		req.Header.Set("X-Request-Id", reqID)
	}
	resp, err := c.Do(req)
	if err != nil {
		tr.Err, tr.End = err, time.Now()
		return tr
	}
	defer resp.Body.Close()
	tr.Status = resp.StatusCode
	if id := resp.Header.Get("X-Request-Id"); id != "" {
		tr.ReqID = id
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		tr.End = time.Now()
		return tr
	}
	tr.Err = readChunks(resp.Body, &tr)
	tr.End = time.Now()
	return tr
}

// readChunks reads SSE lines until EOF or "[DONE]", recording content
// chunk arrival times into tr.
func readChunks(r io.Reader, tr *streamTrace) error {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("{")) { // a JSON answer, not a stream
			tr.Completion = completionTokens(line)
		}
		if bytes.HasPrefix(line, []byte("data: ")) {
			now := time.Now()
			if contentChunk(line) {
				if len(tr.Chunks) == 0 {
					tr.TTFT = now.Sub(tr.Start)
				}
				tr.Chunks = append(tr.Chunks, now)
			}
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				return nil
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// completionTokens is a chat completion's usage.completion_tokens, 0
// if body is not one.
func completionTokens(body []byte) int {
	var v struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	return v.Usage.CompletionTokens
}

// closedLoop runs fn from workers goroutines until total calls were
// started or dur has passed, whichever comes first. It returns the
// number of calls started and the wall time until the last one ended.
func closedLoop(ctx context.Context, workers, total int, dur time.Duration, fn func(ctx context.Context, i int)) (int, time.Duration) {
	return closedLoopSpread(ctx, workers, total, dur, 0, fn)
}

// closedLoopSpread is closedLoop with the workers' first calls spread
// evenly over spread: worker w starts at w·spread/workers. Workers that
// start together and make calls of one length stay in step, and their
// calls arrive as one burst per call; spread over one call's length,
// they arrive one by one, as independent clients' do.
func closedLoopSpread(ctx context.Context, workers, total int, dur, spread time.Duration,
	fn func(ctx context.Context, i int)) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleepCtx(ctx, time.Until(start.Add(spread*time.Duration(w)/time.Duration(workers))))
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				fn(ctx, i)
			}
		}()
	}
	wg.Wait()
	return min(int(next.Load()), total), time.Since(start)
}

// event is one request of an open-loop trace.
type event struct {
	At     time.Duration // offset from the trace start
	Tenant int
	Class  string
}

// replay starts fn for every event at its offset (open loop: a slow
// answer does not delay later arrivals) and waits for all of them. It
// stops starting events once ctx is done; fn gets ctx and must honour it.
func replay(ctx context.Context, events []event, fn func(ctx context.Context, ev event)) {
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, ev := range events {
		if d := time.Until(start.Add(ev.At)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx, ev)
		}()
	}
	wg.Wait()
}

// inOrder runs a then b, or b then a when aFirst is false: interleaved
// rounds of two paths put each first in half their pairs, since the
// first round of a pair can fare differently from the second whichever
// path it is (bench/findings/replicas.md).
func inOrder(aFirst bool, a, b func()) {
	if !aFirst {
		a, b = b, a
	}
	a()
	b()
}
