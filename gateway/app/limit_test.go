package app

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// get sends a request for path on c and returns the response's status.
func get(c net.Conn, path string) (int, error) {
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: pacegate\r\n\r\n")); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// At most n connections are served at once; one that closes, or that a
// handler hijacks, lets the next in; Close unblocks a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.Close()
		}
	})
	srv := &http.Server{Handler: mux}
	l := limitConns(inner, 2, srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first, second := dial(), dial()
	for _, c := range []net.Conn{first, second} {
		if status, err := get(c, "/"); status != http.StatusOK {
			t.Fatalf("first two connections: %d, %v", status, err)
		}
	}
	third := dial()
	thirdStatus := make(chan int, 1)
	go func() { status, _ := get(third, "/"); thirdStatus <- status }()
	select {
	case <-thirdStatus:
		t.Fatal("a third connection was served while two were open")
	case <-time.After(100 * time.Millisecond): // a negative check needs a bound
	}
	if l.Open() != 2 {
		t.Fatalf("open %d, want 2", l.Open())
	}
	first.Close()
	if status := <-thirdStatus; status != http.StatusOK {
		t.Fatalf("third connection after the first closed: %d", status)
	}
	if _, err := get(third, "/hijack"); err == nil {
		t.Fatal("a hijacked connection answered")
	}
	if status, err := get(dial(), "/"); status != http.StatusOK {
		t.Fatalf("after a hijack: %d, %v", status, err)
	}
	if l.Open() != 2 {
		t.Fatalf("open %d (the second and the fourth), want 2", l.Open())
	}
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
