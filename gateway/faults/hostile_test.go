package faults

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// stopReading opens a connection with a tiny receive window, asks for a
// stream far longer than the socket buffers hold, and never reads. The
// gateway's write stalls; after write_stall_timeout it must cut the
// connection, and the upstream call must be aborted. It returns "cut"
// when the connection ends without [DONE], "lost:..." otherwise.
func (h *harness) stopReading(addr string, tokens int, readNow <-chan struct{}) result {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return result{class: "lost:dial: " + err.Error()}
	}
	defer conn.Close()
	body := chatBody("a long answer please", tokens)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: pacegate\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", faultyKey, len(body), body)
	if _, err := io.WriteString(conn, req); err != nil {
		return result{class: "lost:write: " + err.Error()}
	}
	// Stop reading until told to: once the gateway has cut every such
	// stream, or it has had long enough to (see stopReaders). Reading
	// any earlier would unblock a gateway that is merely slow to fill
	// the buffers (under -race, on a busy machine) and hide nothing.
	<-readNow
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // hang guard
	got, err := io.ReadAll(conn)
	switch {
	case isTimeout(err):
		return result{class: "lost:the gateway kept the connection of a client that stopped reading"}
	case strings.HasSuffix(string(got), "data: [DONE]\n\n"):
		return result{class: "lost:the stream completed: it never stalled (buffers too large?)"}
	}
	return result{class: "cut"}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// slowloris opens a connection and trickles header lines forever. The
// gateway must close it once read_header_timeout has passed, without a
// byte of response (net/http answers a header timeout with nothing).
func slowloris(addr string) result {
	start := time.Now() // before the dial: the server's header deadline starts after it
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return result{class: "lost:dial: " + err.Error()}
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: pacegate\r\n"); err != nil {
		return result{class: "lost:write: " + err.Error()}
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // trickle a header line every 200 ms until closed
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := fmt.Fprintf(conn, "X-Slow-%d: 1\r\n", i); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(readHeaderTimeout + 10*time.Second)) // hang guard
	got, err := io.ReadAll(conn)
	took := time.Since(start)
	switch {
	case isTimeout(err):
		return result{class: "lost:a slowloris connection was kept open"}
	case len(got) != 0:
		return result{class: fmt.Sprintf("lost:unexpected reply %q", got)}
	case took < readHeaderTimeout:
		return result{class: fmt.Sprintf("lost:closed after %s, before read_header_timeout", took)}
	}
	return result{class: "timeout"}
}

// badRequest is one hostile or broken request and the exact status the
// gateway must answer it with.
type badRequest struct {
	name        string
	key         string
	contentType string
	body        string
	want        int
}

var badRequests = []badRequest{
	{"no key", "", "application/json", chatBody("x", 4), http.StatusUnauthorized},
	{"unknown key", "sk-nobody-0000", "application/json", chatBody("x", 4), http.StatusUnauthorized},
	{"near-miss key", legitKey + "0", "application/json", chatBody("x", 4), http.StatusUnauthorized},
	{"malformed JSON", faultyKey, "application/json", `{"model":"sim-model","messages":[`, http.StatusBadRequest},
	{"wrong content type", faultyKey, "text/plain", chatBody("x", 4), http.StatusUnsupportedMediaType},
	{"unknown model", faultyKey, "application/json", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, http.StatusNotFound},
	{"oversized body", faultyKey, "application/json", `{"model":"sim-model","messages":[{"role":"user","content":"` +
		strings.Repeat("a", maxBodyBytes) + `"}]}`, http.StatusRequestEntityTooLarge},
}

// send sends b and classifies the answer: "4xx:<status>" when it is the
// exact status wanted with an OpenAI error body, lost otherwise.
func (h *harness) send(b badRequest) result {
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(b.body))
	if err != nil {
		return result{class: "lost:" + err.Error()}
	}
	req.Header.Set("Content-Type", b.contentType)
	if b.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return result{class: "lost:" + err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := classifyStatus(resp.StatusCode, body)
	if resp.StatusCode != b.want {
		r.class = fmt.Sprintf("lost:%s answered %d, want %d", b.name, resp.StatusCode, b.want)
	}
	return r
}
