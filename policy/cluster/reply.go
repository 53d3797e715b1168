package cluster

import (
	"errors"
	"strconv"
	"time"
)

var errBadReply = errors.New("cluster store: unexpected script reply")

// Statuses of admitLua.
const (
	statusHold    = -1
	statusDenied  = 0
	statusGranted = 1
)

// admitReply is admitLua's reply, decoded.
type admitReply struct {
	status int64
	epoch  string
	failed int // 0-based index among the counters asked
	wait   time.Duration
	grants []int64
	after  []int64
}

// parseAdmitReply decodes admitLua's reply for n counters; false for
// anything else (a script bug, or not our Redis).
func parseAdmitReply(v any, n int) (admitReply, bool) {
	xs, ok := v.([]any)
	if !ok || len(xs) < 4 {
		return admitReply{}, false
	}
	var r admitReply
	var fail, wait int64
	if r.status, ok = xs[0].(int64); !ok {
		return admitReply{}, false
	}
	if r.epoch, ok = xs[1].(string); !ok {
		return admitReply{}, false
	}
	fail, ok1 := xs[2].(int64)
	wait, ok2 := xs[3].(int64)
	if !ok1 || !ok2 {
		return admitReply{}, false
	}
	r.wait = saturate(wait)
	switch r.status {
	case statusHold:
		return r, true
	case statusDenied:
		r.failed = int(fail) - 1
		return r, r.failed >= 0 && r.failed < n
	case statusGranted:
	default:
		return admitReply{}, false
	}
	if len(xs) != 4+2*n {
		return admitReply{}, false
	}
	r.grants, r.after = make([]int64, n), make([]int64, n)
	for j := range n {
		g, ok1 := xs[4+2*j].(int64)
		u, ok2 := xs[5+2*j].(int64)
		if !ok1 || !ok2 {
			return admitReply{}, false
		}
		r.grants[j], r.after[j] = g, u
	}
	return r, true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
