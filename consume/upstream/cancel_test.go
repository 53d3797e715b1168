package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// hangingUpstream sends headers and one chunk, then waits for its client
// to go; it reports that on aborted.
func hangingUpstream(t *testing.T) (url string, aborted <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":0}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ch)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, ch
}

func TestCancelAbortsUpstreamRequest(t *testing.T) {
	url, aborted := hangingUpstream(t)
	p := newPool(t, UpstreamConfig{URL: url, Models: []string{"m"}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	emit := consume.EmitFunc(func(ev consume.Event) error {
		if ev.Kind == consume.EventChunk {
			cancel() // the client leaves after the first chunk
		}
		return nil
	})
	go func() { done <- mustAcquire(t, p, "m").Do(ctx, chatReq("r", true, ""), emit) }()
	waitFor(t, aborted, "the upstream to see its request cancelled")
	err := waitFor(t, done, "Do to return")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStreamBroken) {
		t.Fatalf("err = %v, want context.Canceled only", err)
	}
	if st := p.Stats()[0]; !st.Healthy || st.InFlight != 0 {
		t.Errorf("a client cancel counted against the upstream: %+v", st)
	}
}

func TestEmitErrorAbortsUpstreamRequest(t *testing.T) {
	url, aborted := hangingUpstream(t)
	p := newPool(t, UpstreamConfig{URL: url, Models: []string{"m"}})
	gone := errors.New("client gone")
	emit := consume.EmitFunc(func(ev consume.Event) error {
		if ev.Kind == consume.EventChunk {
			return gone
		}
		return nil
	})
	if err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", true, ""), emit); !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the emit error", err)
	}
	waitFor(t, aborted, "the upstream to see its request cancelled")
}
