package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/jsonscan"
	"github.com/pacegate/pacegate/sse"
)

// relay emits a 2xx response as events and closes its body. Errors after
// this point are never retried.
func (s *slot) relay(ctx context.Context, stop context.CancelFunc, resp *http.Response, req *consume.Request, emit consume.Emitter) error {
	defer resp.Body.Close()
	header := resp.Header.Clone()
	removeHopByHop(header)
	if err := emit.Emit(consume.Event{Kind: consume.EventHeader, Status: resp.StatusCode, Header: header, Upstream: s.u.url}); err != nil {
		return err
	}
	if req.Stream && isEventStream(resp.Header.Get("Content-Type")) {
		err := s.relayStream(ctx, stop, resp.Body, req.Shape, emit)
		if err == nil {
			drain(resp.Body, stop)
		}
		return err
	}
	return s.relayBody(ctx, resp, req.Shape, emit)
}

// broken reports a read failure after the first byte. When the caller's
// ctx ended it is the cause, and the upstream is not to blame; otherwise
// the upstream is marked down.
func (s *slot) broken(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("upstream %s: %w", s.u.url, ctx.Err())
	}
	err = fmt.Errorf("%w: %s: %w", ErrStreamBroken, s.u.url, err)
	s.p.markDown(s.u, err)
	return err
}

// relayStream emits one EventChunk per data event, with its event name,
// up to the shape's last event: [DONE] (not relayed) for OpenAI,
// response.completed or message_stop (relayed) for the named shapes.
// Every data event before it must be JSON, and the stream must end with
// it: an upstream that breaks its stream in any way ends the client's
// stream with an error, never with a silent, clean-looking end (an SDK
// takes a clean EOF for a finished answer). A stream whose upstream is
// silent for its idle timeout is aborted through stop.
func (s *slot) relayStream(ctx context.Context, stop context.CancelFunc, body io.Reader, shape consume.Shape, emit consume.Emitter) error {
	r := new(streamReader)
	idle, d := &r.idle, &r.dec
	idle.init(s.u.idle, stop)
	defer idle.close()
	d.Init(body, r.room[:])
	r.repeats.Start(r.last[:])
	tally := consume.Tally{Shape: shape, Repeats: &r.repeats}
	for {
		idle.arm()
		ev, err := d.Borrow() // Data is valid until the next Borrow: emit copies it
		if idle.disarm() {
			return fmt.Errorf("%w: %s: no event for %s", ErrStreamStalled, s.u.url, s.u.idle)
		}
		switch {
		case err == io.EOF && shape.Named():
			return s.malformed(ctx, "the stream ended before its last event")
		case err == io.EOF:
			return s.malformed(ctx, "the stream ended without [DONE]")
		case err != nil:
			return s.broken(ctx, err)
		case !shape.Named() && shape.Ends(ev.Event, ev.Data):
			return nil
		}
		// One pass: validate the JSON and read the usage, for every
		// reader of the response at once.
		reading, valid := tally.Scan(ev.Event, ev.Data)
		if !valid {
			return s.malformed(ctx, "a data event is not JSON")
		}
		last := shape.Named() && shape.Ends(ev.Event, ev.Data)
		more, ends := follows(d, shape, last)
		if err := emit.Emit(consume.Event{Kind: consume.EventChunk, Name: ev.Event, Data: ev.Data, Frame: ev.Raw,
			More: more, Ends: ends, Final: (last || ends) && d.AtEOF(), Reading: reading}); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

// follows says what follows the event just read at once, read already:
// another event (more), or an OpenAI stream's [DONE] (ends); neither
// after the last event of a named stream (last), which is relayed and
// ends the call.
func follows(d *sse.Decoder, shape consume.Shape, last bool) (more, ends bool) {
	next, ok := d.Peek()
	switch {
	case !ok || last:
		return false, false
	case !shape.Named() && shape.Ends("", next):
		return false, true
	}
	return true, false
}

// streamReader is what a stream's relay keeps for the stream's length:
// the idle timer, the decoder, the kept chunk and the decoder's first
// buffers, one allocation instead of four, so that a chunk's read
// touches one region of memory (by a stream's next chunk, on a busy
// gateway, what it touched is out of the cache). The state every chunk
// reads comes first, and the kept chunk with it: all in the
// allocation's first page, ahead of the decoder's 4 KB of buffers.
type streamReader struct {
	idle    idleTimer
	dec     sse.Decoder
	repeats jsonscan.Repeat
	last    [512]byte  // where repeats keeps the last chunk
	room    [4096]byte // the decoder's first buffers: a token chunk is 200-300 bytes
}

// malformed reports a response that arrived but broke its format. The
// upstream answered, so it is not marked down.
func (s *slot) malformed(ctx context.Context, what string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("upstream %s: %w", s.u.url, ctx.Err())
	}
	return fmt.Errorf("%w: %s: %s", ErrStreamMalformed, s.u.url, what)
}

// drain reads what follows [DONE] (normally just the end of the chunked
// body) so that the Transport sees EOF and keeps the connection for the
// next request; closing a body early closes its connection. An upstream
// that keeps talking is cut off by stop.
func drain(body io.Reader, stop context.CancelFunc) {
	t := time.AfterFunc(drainTimeout, stop)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, maxDrainBytes) // an error only costs the connection
}

const (
	drainTimeout  = 500 * time.Millisecond
	maxDrainBytes = 64 << 10
	maxPrealloc   = 1 << 20 // a 1,000-token answer is 7 kB; a batch of embeddings can be MBs
)

// relayBody emits the whole body, bounded by MaxBodyBytes. A body that
// says it is JSON (or says nothing) must be JSON; any other type (the
// text, SRT or VTT answer of a transcription, any text/*) is the
// upstream's to choose and goes to the client as it came, with its type.
func (s *slot) relayBody(ctx context.Context, resp *http.Response, shape consume.Shape, emit consume.Emitter) error {
	limit, contentType := s.p.cfg.MaxBodyBytes, resp.Header.Get("Content-Type")
	data, err := readWhole(resp.Body, resp.ContentLength, limit)
	if err != nil {
		return s.broken(ctx, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("%w: %s: %d bytes", ErrBodyTooLarge, s.u.url, limit)
	}
	tally := consume.Tally{Shape: shape}
	if !declaresJSON(contentType) {
		return emit.Emit(consume.Event{Kind: consume.EventBody, Data: data, Reading: tally.Read(consume.EventBody, "", data)})
	}
	// One pass: validate the JSON and find the usage, decoded alone.
	reading, valid := tally.ScanBody(data)
	if !valid {
		if ctx.Err() != nil {
			return fmt.Errorf("upstream %s: %w", s.u.url, ctx.Err())
		}
		return fmt.Errorf("%w: %s: Content-Type %q", ErrBodyNotJSON, s.u.url, contentType)
	}
	return emit.Emit(consume.Event{Kind: consume.EventBody, Data: data, Reading: reading})
}

// readWhole reads body to its end, or to limit+1 bytes, which says it is
// too long. When the upstream said the body's length (vLLM does) the
// bytes land in one allocation, not in the log2(length/512) that
// io.ReadAll grows and copies through; up to maxPrealloc only, so that a
// length said and not sent costs no more than that.
func readWhole(body io.Reader, length, limit int64) ([]byte, error) {
	var b bytes.Buffer
	if length >= 0 && length <= limit {
		b.Grow(int(min(length, maxPrealloc)) + bytes.MinRead) // MinRead: room to read the EOF
	}
	_, err := b.ReadFrom(io.LimitReader(body, limit+1))
	return b.Bytes(), err
}

// declaresJSON reports whether a body of type ct must be JSON: an
// application/json or +json type, or no usable type at all (the gateway
// then labels it application/json).
func declaresJSON(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err != nil || mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// hopByHop are the headers that describe one connection, not the
// response (RFC 9110 §7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop deletes the headers named in Connection, then the fixed
// list.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}
