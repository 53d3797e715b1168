package admin

import (
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
)

// The runtime samples contention (the mutex profile) and blocking (the
// block profile) only when asked to; pacegate leaves both off, so those
// two profiles are empty until an operator turns sampling on here,
// while looking, and off again. Both settings are the process's: every
// admin API of the process sees the same.
type sampling struct {
	MutexFraction int `json:"mutex_fraction"` // one contention event in N is sampled; 0 = off
	BlockRateNS   int `json:"block_rate_ns"`  // one blocking event per N ns spent blocked; 0 = off
}

// samplingMu serialises changes; blockRate is the block profile's rate
// as last set here, since the runtime does not report it (nothing else
// in pacegate sets it).
var (
	samplingMu sync.Mutex
	blockRate  int
)

func currentSampling() sampling {
	return sampling{MutexFraction: runtime.SetMutexProfileFraction(-1), BlockRateNS: blockRate}
}

func (a *api) getSampling(w http.ResponseWriter, _ *http.Request) {
	samplingMu.Lock()
	defer samplingMu.Unlock()
	writeJSON(w, currentSampling())
}

// putSampling sets either rate or both; a field left out keeps its value.
func (a *api) putSampling(w http.ResponseWriter, r *http.Request) {
	fields, e := decodeFields(r, "mutex_fraction", "block_rate_ns")
	if e != nil {
		writeError(w, e)
		return
	}
	samplingMu.Lock()
	defer samplingMu.Unlock()
	next := currentSampling()
	old := next
	for _, f := range []struct {
		name string
		dst  *int
	}{{"mutex_fraction", &next.MutexFraction}, {"block_rate_ns", &next.BlockRateNS}} {
		if e := samplingField(fields, f.name, f.dst); e != nil {
			writeError(w, e)
			return
		}
	}
	runtime.SetMutexProfileFraction(next.MutexFraction)
	runtime.SetBlockProfileRate(next.BlockRateNS)
	blockRate = next.BlockRateNS
	a.log.Info("admin: profile sampling set", "from", old, "to", next)
	writeJSON(w, next)
}

// samplingField reads fields[name], when present, into dst: an integer
// >= 0.
func samplingField(fields map[string]json.RawMessage, name string, dst *int) *apiError {
	raw, ok := fields[name]
	if !ok {
		return nil
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
		return badField(name, "must be an integer >= 0 (0 turns sampling off), got %s", raw)
	}
	*dst = v
	return nil
}
