package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// endingUpstream serves a one-chunk chat stream, its [DONE] in the write
// that ends the body: with the chunk (one write for all), or after it
// (the chunk flushed first) when the prompt says "flush-first". Its other
// routes (models, health, metrics) are a vllmsim's.
func endingUpstream(t *testing.T) string {
	sim := vllmsim.New(vllmsim.Config{Models: []string{"sim-model"}})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			sim.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: "+oneChunk+"\n\n")
		if bytes.Contains(body, []byte("flush-first")) {
			http.NewResponseController(w).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n") // unflushed: net/http writes it with the body's end
	}))
	t.Cleanup(up.Close)
	return up.URL
}

const oneChunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"sim-model","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`

// A client that stops reading at [DONE] and closes the body keeps its
// connection: the stream's end goes out with the body's end, in one
// write, whether the upstream's end came with its last chunk or after
// it. Go's client, for one, closes a connection whose body was closed
// before its end.
func TestAClientStoppingAtDoneKeepsItsConnection(t *testing.T) {
	s := startStack(t, tenantsYAML, &simServer{url: endingUpstream(t)})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for i, prompt := range []string{"one write", "flush-first", "one write", "flush-first"} {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }}
		body := `{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost,
			s.url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sk-alice")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := dataUntilDone(t, resp)
		if want := []string{oneChunk, "[DONE]"}; resp.StatusCode != http.StatusOK || !slices.Equal(got, want) {
			t.Fatalf("request %d (%s): status %d, events %q; want 200, %q", i, prompt, resp.StatusCode, got, want)
		}
		if i > 0 && !reused {
			t.Fatalf("request %d (%s) needed a new connection: the last one was closed at [DONE]", i, prompt)
		}
	}
}

// dataUntilDone reads a stream's data lines up to [DONE] and closes the
// body there, as a client done with the stream does.
func dataUntilDone(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if data = append(data, d); d == "[DONE]" {
				return data
			}
		}
	}
	t.Fatalf("status %d: the stream ended without [DONE] (%v): %q", resp.StatusCode, sc.Err(), data)
	return nil
}
