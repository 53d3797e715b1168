package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// cacheSim is a simulator with a prefix cache, fast enough for tests.
func cacheSim() vllmsim.Config {
	return vllmsim.Config{TTFT: time.Millisecond, ITL: time.Millisecond, PrefixCacheTokens: 200_000}
}

// conversation is a multi-turn chat with its own long system prompt.
type conversation struct {
	messages []map[string]string
}

func newConversation(i int) *conversation {
	system := strings.Repeat(fmt.Sprintf("conversation %d keeps its own long instructions. ", i), 40)
	return &conversation{messages: []map[string]string{{"role": "system", "content": system}}}
}

// turn asks the next question and returns the request id, the sim that
// answered (by the X-Request-Id it saw) and the cached prompt tokens it
// reported.
func (c *conversation) turn(t *testing.T, s *stack, n int) (id string, cached int) {
	t.Helper()
	c.messages = append(c.messages, map[string]string{"role": "user", "content": fmt.Sprintf("question number %d, with a few new words", n)})
	body, _ := json.Marshal(map[string]any{"model": "sim-model", "max_tokens": 4, "messages": c.messages})
	resp := s.post(context.Background(), "/v1/chat/completions", "sk-alice", string(body))
	out := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("turn %d: %d %s", n, resp.StatusCode, out)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("turn %d: %v %s", n, err, out)
	}
	c.messages = append(c.messages, map[string]string{"role": "assistant", "content": r.Choices[0].Message.Content})
	return resp.Header.Get("X-Request-Id"), r.Usage.Details.Cached
}

// servedBy is the index of the sim that saw request id, or -1.
func servedBy(sims []*simServer, id string) int {
	for i, s := range sims {
		if s.saw(id) {
			return i
		}
	}
	return -1
}

// Every turn of a conversation after the first lands where the first
// did, and finds its prefix cached there.
func TestPrefixRoutingKeepsEachConversationOnOneReplica(t *testing.T) {
	sims := []*simServer{newSim(t, cacheSim()), newSim(t, cacheSim()), newSim(t, cacheSim()), newSim(t, cacheSim())}
	s := startStack(t, tenantsYAML, sims...)
	const convs, turns = 8, 4
	homes := make([][]int, convs)
	var wg sync.WaitGroup
	for i := range convs {
		wg.Go(func() {
			c := newConversation(i)
			for n := range turns {
				id, cached := c.turn(t, s, n)
				homes[i] = append(homes[i], servedBy(sims, id))
				// The simulator's tokens are words: 280 of system prompt, 8
				// a question, 4 an answer. Turn n finds the full 16-token
				// blocks of turn n-1's prompt cached.
				if want := (280 + 8 + (n-1)*12) / 16 * 16; n > 0 && cached != want {
					t.Errorf("conversation %d turn %d: %d cached prompt tokens, want %d (the previous turn's prompt)", i, n, cached, want)
				}
			}
		})
	}
	wg.Wait()
	used := map[int]bool{}
	for i, h := range homes {
		for n := range h {
			if h[n] != h[0] || h[n] < 0 {
				t.Errorf("conversation %d went to replicas %v; want one replica for every turn", i, h)
				break
			}
		}
		used[h[0]] = true
	}
	if len(used) < 2 {
		t.Errorf("8 conversations all on replica(s) %v: misses should go to the least loaded", used)
	}
}

// A replica that dies mid-conversation costs the client nothing: the turn
// that was routed to it is retried on another before its first byte, and
// the later turns stay there.
func TestPrefixRoutingRehomesWhenAReplicaDies(t *testing.T) {
	sims := make([]*simServer, 2)
	servers := make([]*httptest.Server, 2)
	for i := range sims {
		sims[i] = &simServer{Server: vllmsim.New(cacheSim()), finished: make(chan string, 1024)}
		servers[i] = httptest.NewServer(sims[i])
		t.Cleanup(servers[i].Close)
		sims[i].url = servers[i].URL
	}
	s := startStack(t, tenantsYAML, sims...)
	c := newConversation(0)
	id, _ := c.turn(t, s, 0)
	home := servedBy(sims, id)
	if id, _ := c.turn(t, s, 1); servedBy(sims, id) != home {
		t.Fatalf("turn 1 left replica %d", home)
	}
	servers[home].CloseClientConnections()
	servers[home].Close()
	other := 1 - home
	for n := 2; n < 6; n++ {
		id, _ := c.turn(t, s, n) // fails the test on any client-visible error
		if got := servedBy(sims, id); got != other {
			t.Fatalf("turn %d after replica %d died was served by %d, want %d", n, home, got, other)
		}
	}
}
