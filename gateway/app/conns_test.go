package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// healthz sends GET /healthz on conn (keep-alive) and reads the answer's
// status; an error reads as 0.
func healthz(conn net.Conn, br *bufio.Reader) int {
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: pacegate\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// server.max_connections bounds the connections served at once: a third
// connection is not served while two are open, and is as soon as one
// closes.
func TestMaxConnections(t *testing.T) {
	ta := startApp(t, vllmsim.Config{}, "server: {max_connections: 2, idle_timeout: 1h}\n")
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ta.a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if st := healthz(c, bufio.NewReader(c)); st != 200 {
			t.Fatalf("status %d", st)
		}
		open = append(open, c)
	}
	third, err := net.Dial("tcp", ta.a.Addr()) // the kernel completes the handshake
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	served := make(chan int, 1)
	go func() { served <- healthz(third, bufio.NewReader(third)) }()
	select {
	case st := <-served:
		t.Fatalf("a third connection was served (%d) while two were open", st)
	case <-time.After(200 * time.Millisecond): // a negative check needs a bound
	}
	open[0].Close()
	if st := <-served; st != 200 {
		t.Fatalf("status %d", st)
	}
}

// server.idle_timeout closes a keep-alive connection left idle, and not
// before: the server arms its idle deadline after it read the request, so
// the time the request was sent is a lower bound the close cannot beat
// (a client-side clock taken after the answer arrived could be late by the
// answer's way back, which made this test fail once in CI at 297.6 ms).
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ta := startApp(t, vllmsim.Config{}, "server: {idle_timeout: 300ms}\n")
	c, err := net.Dial("tcp", ta.a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	sent := time.Now()
	if st := healthz(c, br); st != 200 {
		t.Fatalf("status %d", st)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read on an idle connection: %v, want EOF", err)
	}
	if d := time.Since(sent); d < idle {
		t.Fatalf("closed after %v, before idle_timeout %v", d, idle)
	}
}
