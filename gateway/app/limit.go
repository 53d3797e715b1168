package app

import (
	"net"
	"net/http"
	"sync"
)

// limitListener accepts at most n connections at once: Accept waits for a
// connection to end before it takes the next one from the kernel, so
// extra clients (a slowloris flood, say) wait in the accept queue instead
// of costing a goroutine and buffers each. The server that serves it
// reports each connection's end through ConnState, which gives its token
// back: the connection itself is the kernel's, unwrapped, so that no
// read or write of it (a stream's every chunk) passes through a wrapper
// of ours. It is safe for concurrent use; Close unblocks a waiting
// Accept.
type limitListener struct {
	net.Listener
	sem       chan struct{} // one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// limitConns limits l to n connections for srv, which must serve it: it
// takes srv's ConnState hook, so that the limit cannot be set up without
// the hook that keeps it.
func limitConns(l net.Listener, n int, srv *http.Server) *limitListener {
	ll := &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
	srv.ConnState = ll.ConnState
	return ll
}

// Accept implements [net.Listener.Accept].
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return c, nil
}

// ConnState is the http.Server's ConnState hook: a connection that
// closed or was hijacked (both final, and each reported once per
// connection) gives its token back.
func (l *limitListener) ConnState(_ net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		<-l.sem
	}
}

// Close implements [net.Listener.Close].
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Open reports the connections open now.
func (l *limitListener) Open() int { return len(l.sem) }
