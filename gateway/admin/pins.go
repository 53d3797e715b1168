package admin

import (
	"sync"

	"github.com/pacegate/pacegate/gateway/control"
	"github.com/pacegate/pacegate/policy"
)

// pinner sets column factors and remembers which are pinned. With a
// control loop it defers to the loop (which must know the pins); without
// one it keeps the pins itself, so the API answers the same either way.
type pinner interface {
	Pin(model string, f float64)
	Set(model string, f float64)
	Unpin(model string)
	Pinned(model string) bool
}

func newPinner(loop *control.Loop, p *policy.Pacer) pinner {
	if loop != nil {
		return loop
	}
	return &localPins{pacer: p, pinned: map[string]bool{}}
}

// localPins is the pinner without a loop. Safe for concurrent use.
type localPins struct {
	pacer *policy.Pacer

	mu     sync.Mutex
	pinned map[string]bool
}

func (l *localPins) Pin(model string, f float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pinned[model] = true
	l.pacer.SetColumnFactor(model, f)
}

func (l *localPins) Set(model string, f float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pinned, model)
	l.pacer.SetColumnFactor(model, f)
}

func (l *localPins) Unpin(model string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pinned, model)
}

func (l *localPins) Pinned(model string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pinned[model]
}
