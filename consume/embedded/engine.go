package embedded

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// Config sizes an Engine. The zero value is usable: every zero field takes
// the default written next to it.
type Config struct {
	// Workers is the size of the handler pool shared by all LiteTopics.
	// Zero means 64.
	Workers int
	// MaxMessages caps the messages queued in the engine. Zero means 100000.
	MaxMessages int
	// MaxBytes caps the body bytes queued in the engine. Zero means 256 MiB.
	MaxBytes int64
	// IdleTTL is how long an empty LiteTopic is kept; it is reclaimed
	// lazily by a later Publish. Zero means 10 minutes.
	IdleTTL time.Duration
	// RetryBackoff is the delay before redelivering after a Retry result
	// that made attempt the next Attempt. Nil means 100ms·2^(attempt-2),
	// capped at 10 s.
	RetryBackoff func(attempt int) time.Duration
	// MaxAttempts drops (and logs) a message whose handler answered Retry
	// that many times. Zero means 16.
	MaxAttempts int
	// Logger receives panics and drops. Nil means slog.Default().
	Logger *slog.Logger
	// OnPanic, if set, is called after a handler panicked with the
	// delivery (valid during the call, as a Handler's) and the recovered
	// value; the message has been dropped.
	OnPanic func(d *consume.Delivery, v any)
	// InlineDelivery lets Publish deliver a message that lands in an idle
	// LiteTopic itself, on the caller's goroutine, while a worker is free
	// and no other LiteTopic waits (see Publish). It saves a worker
	// thread's wake-up per request on an idle bucket, but Publish then
	// takes as long as the handler: only for a handler that returns
	// promptly, as consume.Consumer.Handle does.
	InlineDelivery bool
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.MaxMessages <= 0 {
		c.MaxMessages = 100000
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 256 << 20
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = 10 * time.Minute
	}
	if c.RetryBackoff == nil {
		c.RetryBackoff = defaultBackoff
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 16
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func defaultBackoff(attempt int) time.Duration {
	d := 100 * time.Millisecond
	for i := 2; i < attempt && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// Engine is an in-process LiteTopic broker implementing [consume.Backend].
// Create it with [New]; it is safe for concurrent use.
//
// One mutex, mu, guards all queue state: the topic map and every topic,
// the ready queue, the idle list, the timer heap and the counters. Handler
// calls run without it. Workers wait on cond (tied to mu) for a ready
// topic; the timer goroutine waits on a channel and its timer.
type Engine struct {
	cfg  Config
	ctx  context.Context // handler context, cancelled by Close
	stop context.CancelFunc
	wake chan struct{} // cap 1: the earliest due time changed
	quit chan struct{} // closed by Close: the timer goroutine returns

	mu      sync.Mutex
	cond    sync.Cond // L is &mu; signalled when a topic becomes ready
	topics  map[string]*topic
	ready   topicQueue
	idle    idleList
	timers  timerHeap
	spare   spareEntries
	msgs    int
	bytes   int64
	rate    drainRate // engine-wide, for FullError.RetryAfter
	handler consume.Handler
	busy    int // handler calls in progress
	running int // live engine goroutines
	started bool
	closed  bool
	stopped chan struct{} // closed once closed and running == 0
}

// New returns an Engine that queues at once and delivers after Start.
func New(cfg Config) *Engine {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg:     cfg.withDefaults(),
		ctx:     ctx,
		stop:    cancel,
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		topics:  make(map[string]*topic),
		stopped: make(chan struct{}),
	}
	e.cond.L = &e.mu
	return e
}

var _ consume.Backend = (*Engine)(nil)

// errStarted is returned by a second Start.
var errStarted = errors.New("embedded: engine already started")

// Start implements [consume.Backend.Start]: it starts the worker pool and
// the timer goroutine, which Close stops.
func (e *Engine) Start(h consume.Handler) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return consume.ErrClosed
	case e.started:
		return errStarted
	}
	e.started, e.handler = true, h
	e.running = e.cfg.Workers + 1
	for range e.cfg.Workers {
		go e.worker()
	}
	go e.timerLoop()
	return nil
}

// MinSuspend implements [consume.Backend.MinSuspend]. The timer goroutine
// resumes a topic within about a millisecond of its due time, so shorter
// suspends are left to the consumer's local wait.
func (e *Engine) MinSuspend() time.Duration { return time.Millisecond }

// Ready implements [consume.Backend.Ready]: nil until Close.
func (e *Engine) Ready(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return consume.ErrClosed
	}
	return nil
}

// Close implements [consume.Backend.Close]. Messages in flight when ctx
// ends are reported as leftovers too, since they were never acknowledged.
func (e *Engine) Close(ctx context.Context) (consume.Leftover, error) {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		e.stop()
		close(e.quit)
		e.cond.Broadcast()
		if e.running == 0 {
			close(e.stopped)
		}
	}
	e.mu.Unlock()
	var err error
	select {
	case <-e.stopped:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return e.leftover(), err
}

// exit is deferred by every engine goroutine.
func (e *Engine) exit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running--
	if e.running == 0 && e.closed {
		close(e.stopped)
	}
}

func (e *Engine) leftover() consume.Leftover {
	e.mu.Lock()
	defer e.mu.Unlock()
	var l consume.Leftover
	for _, t := range e.topics {
		for en := t.head; en != nil; en = en.next {
			l.IDs = append(l.IDs, en.d.ID)
		}
	}
	return l
}
