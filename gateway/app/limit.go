package app

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at once: Accept waits for a
// connection to close before it takes the next one from the kernel, so
// extra clients (a slowloris flood, say) wait in the accept queue instead
// of costing a goroutine and buffers each. It is safe for concurrent use;
// Close unblocks a waiting Accept.
type limitListener struct {
	net.Listener
	sem       chan struct{} // one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func limitConns(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
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
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close implements [net.Listener.Close].
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Open reports the connections open now.
func (l *limitListener) Open() int { return len(l.sem) }

// limitConn gives its token back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
