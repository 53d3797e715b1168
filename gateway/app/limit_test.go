package app

import (
	"errors"
	"net"
	"testing"
	"time"
)

// At most n connections are accepted at once; closing one lets the next
// in, and Close unblocks a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitConns(inner, 2)
	accepted := make(chan net.Conn, 3)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first := <-accepted
	<-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(100 * time.Millisecond): // a negative check needs a bound
	}
	if l.Open() != 2 {
		t.Fatalf("open %d, want 2", l.Open())
	}
	first.Close()
	first.Close() // a second Close gives back nothing more
	third := <-accepted
	defer third.Close()
	if l.Open() != 2 {
		t.Fatalf("open %d after one closed and one came in, want 2", l.Open())
	}
	l.Close()
	if err := <-acceptErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
