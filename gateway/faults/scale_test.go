package faults

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// raiseFDLimit raises the soft limit on open files to need (at most the
// hard limit): a slowloris flood holds two descriptors per connection in
// this process, the client's and the in-process gateway's. It returns the
// soft limit in force.
func raiseFDLimit(t testing.TB, need uint64) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= need {
		return lim.Cur
	}
	lim.Cur = min(need, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < need {
		t.Logf("open files: soft limit raised to the hard limit %d, below the %d wanted", lim.Cur, need)
	}
	return lim.Cur
}

// readTimeoutBody is the gateway's 408 for a body slower than
// read_body_timeout.
const readTimeoutBody = `{"error":{"message":"The request body did not arrive in time.","type":"invalid_request_error","param":null,"code":null}}`

// slowBody sends a request's headers at once, then trickles its body a
// byte every 300 ms. The gateway must answer 408 once read_body_timeout
// has passed since the headers, and close the connection.
func slowBody(addr string) result {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return result{class: "lost:dial: " + err.Error()}
	}
	defer conn.Close()
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: pacegate\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":\"sim-model\",\"messages\":[{\"role\":\"user\",\"content\":\"", faultyKey)
	start := time.Now() // the body's deadline starts once the headers are read
	if _, err := io.WriteString(conn, head); err != nil {
		return result{class: "lost:write: " + err.Error()}
	}
	stop := make(chan struct{})
	trickled := make(chan struct{})
	defer func() { close(stop); <-trickled }()
	go func() {
		defer close(trickled)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, "a"); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(readBodyTimeout + 10*time.Second)) // hang guard
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if isTimeout(err) {
			return result{class: "lost:a trickled body was waited for"}
		}
		return result{class: "lost:read: " + err.Error()}
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	r := classifyStatus(resp.StatusCode, body)
	switch {
	case resp.StatusCode != http.StatusRequestTimeout:
		return result{class: fmt.Sprintf("lost:status %d, want 408", resp.StatusCode), body: string(body)}
	case took < readBodyTimeout:
		return result{class: fmt.Sprintf("lost:answered after %s, before read_body_timeout", took)}
	}
	return r
}

func slowBodyFlood(h *harness, z sizes) outcome {
	res := make([]result, z.slowBodies)
	parallel(z.slowBodies, z.slowBodies, func(i int) { res[i] = slowBody(h.app.Addr()) })
	return outcome{results: res, faults: z.slowBodies}
}

// keyFlood sends n requests, each with a fresh random API key, over
// conns keep-alive connections to addr, and classifies each answer:
// "4xx:401" when it is exactly the unknown-key 401, lost otherwise. It
// speaks HTTP/1.1 on raw sockets, so that the client costs little next
// to the gateway it measures.
func keyFlood(addr string, n, conns int) []result {
	res := make([]result, n)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keyFloodConn(addr, res[c*n/conns:(c+1)*n/conns], uint64(c))
		}()
	}
	wg.Wait()
	return res
}

const want401 = `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

func keyFloodConn(addr string, res []result, seed uint64) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		for i := range res {
			res[i] = result{class: "lost:dial: " + err.Error()}
		}
		return
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	body := chatBody("x", 4)
	br := bufio.NewReader(conn)
	var req bytes.Buffer
	key := make([]byte, 16)
	for i := range res {
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		req.Reset()
		fmt.Fprintf(&req, "POST /v1/chat/completions HTTP/1.1\r\nHost: pacegate\r\nAuthorization: Bearer sk-%s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", hex.EncodeToString(key), len(body), body)
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
		if _, err := conn.Write(req.Bytes()); err != nil {
			res[i] = result{class: "lost:write: " + err.Error()}
			return
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			res[i] = result{class: "lost:read: " + err.Error()}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			res[i] = result{class: "lost:read body: " + err.Error()}
			return
		case resp.StatusCode != http.StatusUnauthorized || string(b) != want401:
			res[i] = result{class: fmt.Sprintf("lost:status %d %s", resp.StatusCode, b)}
		default:
			res[i] = result{class: "4xx:401"}
		}
	}
}

// randomKeys floods the gateway process with z.keys requests, each with
// a random API key, over keep-alive connections, after a warm-up of
// z.keyWarmup. No state may be allocated before authentication: the
// process's RSS may grow by at most keyRSSBound over the flood.
func randomKeys(h *harness, z sizes) outcome {
	addr := h.proc.listen
	_ = keyFlood(addr, z.keyWarmup, 8) // reach the steady state: heap size, goroutines, buffers
	rss0 := h.proc.rss()
	start := time.Now()
	res := keyFlood(addr, z.keys, 8)
	m := measure{rssBefore: rss0, rssAfter: h.proc.rss(), n: z.keyWarmup + len(res), took: time.Since(start)}
	growth := int64(m.rssAfter) - int64(rss0)
	rss1 := m.rssAfter
	if growth > keyRSSBound {
		h.t.Errorf("the gateway's RSS grew by %.1f MiB over %d random keys (%.1f → %.1f MiB), want at most %d MiB",
			float64(growth)/(1<<20), len(res), float64(rss0)/(1<<20), float64(rss1)/(1<<20), keyRSSBound>>20)
	}
	return outcome{results: res, bad: len(res), measure: &m}
}

// keyRSSBound is the most the gateway's RSS may grow over the random-key
// flood: state kept per key, even 17 bytes of it, would pass it over a
// million keys.
const keyRSSBound = 16 << 20

// procFlood sends z.procFlood bad requests (badRequests in turn) to the
// gateway process (the suite reads its CPU time over the row).
func procFlood(h *harness, z sizes) outcome {
	start := time.Now()
	out := badFlood(h, sizes{flood: z.procFlood, width: z.width})
	out.measure = &measure{n: len(out.results), took: time.Since(start)}
	return out
}

// measure is what a process scenario read of the gateway process.
type measure struct {
	n                   int           // rejected requests sent in the row (a warm-up included)
	took                time.Duration // the flood's (after the warm-up)
	rssBefore, rssAfter uint64
	reloads, restarts   int
	downtime            time.Duration // SIGTERM to listening again
}

// flood is width goroutines each calling worker in a loop until stop,
// which waits for them and returns every result; stop may be called more
// than once (later calls return nil).
type flood struct {
	quit chan struct{}
	done chan []result
	once sync.Once
}

func startFlood(width int, worker func(i int) result) *flood {
	f := &flood{quit: make(chan struct{}), done: make(chan []result, 1)}
	go func() {
		var mu sync.Mutex
		var all []result
		var wg sync.WaitGroup
		for w := range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-f.quit:
						return
					default:
					}
					r := worker(w*1_000_000 + i)
					mu.Lock()
					all = append(all, r)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		f.done <- all
	}()
	return f
}

func (f *flood) stop() []result {
	var res []result
	f.once.Do(func() {
		close(f.quit)
		res = <-f.done
	})
	return res
}

// reloadUnderFlood reloads the gateway process's config z.reloads times
// during a flood of streams, by SIGHUP and by rewriting the file in
// turn (each rewrite adds a tenant), and waits for each reload's log
// line. Nothing may be dropped: every stream completes.
func reloadUnderFlood(h *harness, z sizes) outcome {
	p := h.proc
	base := h.gatewayYAML(p.listen)
	defer p.writeConfig(base)
	before := p.reloadCount()
	fl := startFlood(z.width, func(i int) result {
		return h.stream(faultyKey, chatBody(fmt.Sprintf("reload flood %d", i), 8))
	})
	defer fl.stop() // also on a failed check: the flood's goroutines never outlive the scenario
	for i := range z.reloads {
		if i%2 == 0 {
			p.signal(syscall.SIGHUP)
		} else {
			p.writeConfig(base + fmt.Sprintf("  - {id: extra-%d, keys: [sk-extra-%d]}\n", i, i))
		}
		eventually(h.t, 10*time.Second, fmt.Sprintf("reload %d's log line", i+1), func() bool {
			return p.reloadCount() == before+i+1
		})
	}
	res := fl.stop()
	return outcome{results: res, faults: z.reloads, measure: &measure{reloads: p.reloadCount() - before}}
}

// restartUpstream kills the first simulator's server (every connection
// to it closed at once, as when the process dies) during a flood of
// streams, keeps it down for 300 ms, and serves it again on the same
// address. Every stream must end as a response or an explicit error,
// and the pool must see the upstream healthy again (settled).
func restartUpstream(h *harness, z sizes) outcome {
	fl := startFlood(z.width, func(i int) result {
		return h.stream(faultyKey, chatBody(fmt.Sprintf("upstream restart %d", i), 64))
	})
	defer fl.stop() // also on a failed check: the flood's goroutines never outlive the scenario
	h.waitStreams(200)
	addr := h.srvs[0].Listener.Addr().String()
	h.srvs[0].CloseClientConnections()
	h.srvs[0].Close()
	<-time.After(300 * time.Millisecond) // the upstream is down for this long
	ts, err := h.serveSim(h.sims[0], addr)
	if err != nil {
		h.t.Fatalf("the upstream could not listen again on %s: %v", addr, err)
	}
	h.srvs[0] = ts
	h.waitStreams(200)
	return outcome{results: fl.stop(), faults: 1, measure: &measure{restarts: 1}}
}

// restartGateway restarts the gateway process during a flood of
// streams: SIGTERM (it drains: in-flight requests finish, new ones are
// refused), then the same binary and config again on the same port.
// This is what restarting the queue backend means for the embedded
// backend: the queue lives in the gateway process and restarts with it
// (for RocketMQ it is the broker, which `make rocketmq-test` covers).
// Clients retry what the restart refused (harness.retry), and every
// stream must end as a response or an explicit error.
func restartGateway(h *harness, z sizes) outcome {
	fl := startFlood(z.width, func(i int) result {
		return h.stream(faultyKey, chatBody(fmt.Sprintf("gateway restart %d", i), 64))
	})
	defer fl.stop() // also on a failed check: the flood's goroutines never outlive the scenario
	h.waitStreams(200)
	start := time.Now()
	h.proc.terminate()
	if err := h.proc.start(); err != nil {
		h.t.Fatal(err)
	}
	downtime := time.Since(start)
	h.waitStreams(200)
	return outcome{results: fl.stop(), faults: 1, measure: &measure{restarts: 1, downtime: downtime}}
}

// waitStreams waits until the simulators have received n more requests:
// the flood is under way.
func (h *harness) waitStreams(n int64) {
	h.t.Helper()
	count := func() int64 {
		var c int64
		for _, s := range h.sims {
			c += s.Stats().Requests
		}
		return c
	}
	from := count()
	eventually(h.t, 20*time.Second, fmt.Sprintf("%d more upstream requests", n), func() bool { return count() >= from+n })
}
