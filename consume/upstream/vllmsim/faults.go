package vllmsim

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault makes one response misbehave. The zero Fault is a normal
// response, byte for byte.
//
// A Fault is chosen per request, in this order: the X-Sim-Fault header
// (see [ParseFault]), then the first matching rule of Config.Faults. The
// gateway does not forward client headers, so a test that goes through
// a gateway scripts faults with Config.Faults rules keyed by a marker in
// the prompt (Match), which the gateway passes on unchanged:
//
//	vllmsim.New(vllmsim.Config{Faults: []vllmsim.FaultRule{
//		{Match: "FAULT-STALL", Fault: vllmsim.Fault{Stall: true, StallAfter: 3}},
//	}})
//	// then send a chat request whose message contains "FAULT-STALL"
type Fault struct {
	// Status, when > 0, answers with that status and an OpenAI-shaped
	// error body before any other byte.
	Status int
	// SlowHeaders delays the response headers by this long (the request
	// is aborted if the client leaves first).
	SlowHeaders time.Duration
	// Stall, with StallAfter, sends StallAfter data events and then
	// nothing more, keeping the connection open until the client leaves.
	// A non-streamed response sends nothing at all.
	Stall      bool
	StallAfter int
	// GarbageSSE sends, after the first data event, bytes that are not an
	// event stream: a NUL-laden line and a data event that is not JSON.
	// The rest of the stream follows as usual.
	GarbageSSE bool
	// TruncatedJSON cuts the second data event (a non-streamed body) to
	// half its length; the rest follows as usual.
	TruncatedJSON bool
	// NoDone ends the stream cleanly after its last chunk, without
	// "data: [DONE]".
	NoDone bool
}

// FaultRule applies a Fault to requests for a whole run. Its zero value
// (with a zero Fault) matches every request and does nothing.
type FaultRule struct {
	// Match selects requests whose raw body contains it; empty matches
	// every request.
	Match string
	// After skips the first After matching requests.
	After int
	// Count is how many matching requests (after the skipped ones) get the
	// Fault; 0 means all of them.
	Count int
	Fault Fault
}

// ParseFault reads an X-Sim-Fault header value: comma-separated items
// among status=N, slow-headers=DURATION, stall-after=N, garbage-sse,
// truncated-json and no-done. Example: "stall-after=3" or
// "slow-headers=2s,no-done".
func ParseFault(v string) (Fault, error) {
	var f Fault
	for _, item := range strings.Split(v, ",") {
		if err := f.set(strings.TrimSpace(item)); err != nil {
			return Fault{}, err
		}
	}
	return f, nil
}

// ParseFaultRule reads the --fault flag: the items of [ParseFault] plus
// match=SUBSTRING, after=N and count=N, e.g.
// "status=503,count=5" (a 5xx burst: the next five requests fail) or
// "stall-after=3,match=FAULT-STALL".
func ParseFaultRule(v string) (FaultRule, error) {
	var r FaultRule
	var err error
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		key, val, _ := strings.Cut(item, "=")
		switch key {
		case "match":
			r.Match = val
		case "after":
			r.After, err = nonNegativeInt(item, val)
		case "count":
			r.Count, err = nonNegativeInt(item, val)
		default:
			err = r.Fault.set(item)
		}
		if err != nil {
			return FaultRule{}, err
		}
	}
	return r, nil
}

// set applies one item of a fault spec.
func (f *Fault) set(item string) error {
	key, val, hasVal := strings.Cut(item, "=")
	var err error
	switch {
	case key == "" && !hasVal:
		return nil
	case key == "status":
		if f.Status = parseStatus(val); f.Status == 0 {
			err = fmt.Errorf("vllmsim: fault %q: want a status 100..999", item)
		}
	case key == "slow-headers":
		if f.SlowHeaders, err = time.ParseDuration(val); err != nil || f.SlowHeaders < 0 {
			err = fmt.Errorf("vllmsim: fault %q: want a duration >= 0", item)
		}
	case key == "stall-after":
		f.Stall = true
		f.StallAfter, err = nonNegativeInt(item, val)
	case item == "garbage-sse":
		f.GarbageSSE = true
	case item == "truncated-json":
		f.TruncatedJSON = true
	case item == "no-done":
		f.NoDone = true
	default:
		err = fmt.Errorf("vllmsim: unknown fault %q", item)
	}
	return err
}

func nonNegativeInt(item, val string) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("vllmsim: fault %q: want an integer >= 0", item)
	}
	return n, nil
}

// takeFault returns the Fault planned for r (whose body is body) and
// consumes one use of the rule that matched.
func (s *Server) takeFault(r *http.Request, body []byte) (Fault, *apiError) {
	if v := r.Header.Get("X-Sim-Fault"); v != "" {
		f, err := ParseFault(v)
		if err != nil {
			return Fault{}, badRequest(err.Error(), nil)
		}
		return f, nil
	}
	if len(s.cfg.Faults) == 0 {
		return Fault{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, rule := range s.cfg.Faults {
		if !bytes.Contains(body, []byte(rule.Match)) {
			continue
		}
		n := s.ruleSeen[i]
		s.ruleSeen[i]++
		if n >= rule.After && (rule.Count == 0 || n < rule.After+rule.Count) {
			return rule.Fault, nil
		}
	}
	return Fault{}, nil
}

// garbage is what GarbageSSE sends: a line of binary noise (which an SSE
// decoder reads as an unknown field and ignores) and a data event that
// is not JSON.
var garbage = []byte("\x00\xff\xfe garbage \x01\ndata: }{ not json \x00\n\n")
