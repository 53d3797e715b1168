package app

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands out the server ends of net.Pipe connections, so that
// an http.Server runs inside a synctest bubble (its deadlines on fake
// time). Close ends Accept.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// serveBodyDeadline serves h behind bodyDeadline(d) in the bubble until
// the test ends.
func serveBodyDeadline(t *testing.T, d time.Duration, h http.HandlerFunc) *pipeListener {
	ln := newPipeListener()
	srv := &http.Server{Handler: bodyDeadline(h, d)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln
}

// readBodyStatus is a handler that reads the body: 200 when it arrived,
// 408 on a deadline, 400 otherwise.
func readBodyStatus(w http.ResponseWriter, r *http.Request) {
	_, err := io.ReadAll(r.Body)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.WriteHeader(http.StatusRequestTimeout)
	case err != nil:
		w.WriteHeader(http.StatusBadRequest)
	}
}

const post = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"

// A body trickled slower than server.read_body_timeout fails at exactly
// the deadline, counted from the end of the headers.
func TestBodyDeadlineCutsATrickle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failedAfter time.Duration
		ln := serveBodyDeadline(t, 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			readBodyStatus(w, r)
			failedAfter = time.Since(start)
		})
		c := ln.dial()
		trickled := make(chan struct{})
		defer func() { c.Close(); <-trickled }()
		go func() { // one byte a second: 10 bytes would take 10 s
			defer close(trickled)
			if _, err := io.WriteString(c, post); err != nil {
				return
			}
			for range 10 {
				if _, err := io.WriteString(c, "a"); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestTimeout || failedAfter != 5*time.Second {
			t.Fatalf("status %d after %s, want 408 after 5s", resp.StatusCode, failedAfter)
		}
	})
}

// A body that arrives in time clears the deadline: the response may go on
// long after it, and the request's context stays alive.
func TestBodyDeadlineClearedAfterTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := serveBodyDeadline(t, 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
			readBodyStatus(w, r)
			time.Sleep(time.Minute) // a long stream, in fake time
			if err := r.Context().Err(); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "done")
		})
		c := ln.dial()
		defer c.Close()
		go func() { _, _ = io.WriteString(c, post+"0123456789") }()
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "done" {
			t.Fatalf("status %d %q, want 200 \"done\"", resp.StatusCode, b)
		}
		// The connection is reused, with a fresh deadline for the next body.
		go func() { _, _ = io.WriteString(c, strings.Replace(post, "10", "2", 1)+"ab") }()
		if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("second request on the connection: %v %v", resp, err)
		}
	})
}
