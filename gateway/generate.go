package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// exchange is one generation request in flight: what the handler knows
// about it from admission to the last byte. Only the handler's goroutine
// touches it.
type exchange struct {
	id       string
	tenant   *policy.Tenant
	key      policy.Key
	req      *genRequest
	admitted time.Time
	adm      policy.Admission
	pending  *consume.Pending
	ticket   consume.Ticket
	ctx      context.Context
	log      *logInfo

	firstByte time.Time
	usage     int64 // real total tokens, -1 until known
}

func (s *Server) generate(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, e := s.admit(w, r, ep)
		if e != nil {
			writeError(w, e)
			return
		}
		if x == nil { // rejected with a 429 already written
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		x.ctx = ctx
		if e := s.enqueue(x); e != nil {
			if e.Status == http.StatusTooManyRequests {
				s.cfg.Observer.Rejected(x.key.Tenant, x.key.Model, "QUEUE_FULL")
			}
			s.finish(x, outcomeOf(e))
			writeError(w, e)
			return
		}
		defer s.cfg.Registry.Delete(x.id)
		outcome := s.respond(w, r, x)
		s.finish(x, outcome)
	}
}

// admit authenticates, parses and checks the caps. It returns (nil, nil)
// when it has already answered 429.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, ep endpoint) (*exchange, *APIError) {
	if s.draining.Load() {
		return nil, errUnavailable("pacegate is shutting down; retry on another replica.")
	}
	tenant, e := s.authenticate(r)
	if e != nil {
		return nil, e
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		return nil, e
	}
	req, e := parseGenRequest(body, ep)
	if e != nil {
		return nil, e
	}
	li := infoFrom(r.Context())
	li.tenant, li.model = tenant.ID, req.Model
	if !s.serves(req.Model) {
		return nil, errModelNotFound(req.Model)
	}
	x := &exchange{id: li.id, tenant: tenant, key: policy.Key{Tenant: tenant.ID, Model: req.Model},
		req: req, admitted: time.Now(), log: li, usage: -1}
	req.Path = ep.path
	x.adm = s.cfg.Admitter.Admit(tenant, req.Model, s.reservation(req))
	setRateLimitHeaders(w.Header(), x.adm)
	if !x.adm.Allowed {
		s.reject(w, x, string(x.adm.Reason), x.adm.RetryAfter, rateLimitError(x))
		return nil, nil
	}
	if wait, over := s.predictedWait(x.key); over > 0 {
		s.reject(w, x, "MAX_WAIT", over, queueError(x, fmt.Sprintf(
			"the queue for %s would take %s to reach this request, longer than its max_wait of %s",
			req.Model, wait.Round(time.Millisecond), s.cfg.Table.Limits(x.key).MaxWait)))
		return nil, nil
	}
	return x, nil
}

// reservation is the token cost reserved at admission.
func (s *Server) reservation(req *genRequest) int64 {
	completion := req.MaxTokens
	if completion == 0 {
		completion = s.cfg.DefaultCompletionTokens
	}
	return req.PromptTokens + completion
}

// predictedWait estimates how long the bucket's backlog takes to drain at
// its effective rate. over > 0 is by how much it exceeds max_wait, which
// is also when a retry could fit.
func (s *Server) predictedWait(k policy.Key) (wait, over time.Duration) {
	backlog := s.cfg.Buckets.Backlog(k)
	if backlog == 0 {
		return 0, 0
	}
	rate := s.cfg.Pacer.EffectiveRate(k)
	if rate <= 0 {
		return 0, 0
	}
	wait = time.Duration(float64(backlog) / rate * float64(time.Second))
	if maxWait := s.cfg.Table.Limits(k).MaxWait; maxWait > 0 && wait > maxWait {
		return wait, wait - maxWait
	}
	return wait, 0
}

// enqueue registers the response channel and publishes the request.
func (s *Server) enqueue(x *exchange) *APIError {
	limits := s.cfg.Table.Limits(x.key)
	if limits.Backlog > 0 && s.cfg.Buckets.Backlog(x.key) >= limits.Backlog {
		return queueFull(x, limits.Backlog, time.Duration(float64(time.Second)/max(s.cfg.Pacer.EffectiveRate(x.key), 1e-9)))
	}
	x.pending = consume.NewPending(x.ctx, x.id, x.key.Tenant, x.key.Model, 0)
	s.cfg.Registry.Register(x.pending)
	x.ticket = s.cfg.Buckets.Enqueue(x.key, x.admitted)
	err := s.cfg.Backend.Publish(x.ctx, s.message(x, limits))
	if err == nil {
		return nil
	}
	s.cfg.Buckets.Cancel(x.ticket)
	s.cfg.Registry.Delete(x.id)
	x.pending = nil
	var full *consume.FullError
	if errors.As(err, &full) {
		return queueFull(x, int(full.Limit), full.RetryAfter)
	}
	s.cfg.Logger.Warn("publish failed", "request_id", x.id, "err", err)
	e := errUnavailable("The request queue is unavailable; please retry shortly.")
	e.RetryAfter = time.Second
	return e
}

func (s *Server) message(x *exchange, limits policy.Limits) *consume.Message {
	stream := "0"
	if x.req.Stream {
		stream = "1"
	}
	return &consume.Message{
		ID:         x.id,
		LiteTopic:  consume.LiteTopicName(x.key.Tenant, x.key.Model, s.cfg.ReplicaID),
		Body:       x.req.Body,
		MaxBacklog: limits.Backlog,
		Properties: map[string]string{
			consume.PropTenant:   x.key.Tenant,
			consume.PropModel:    x.key.Model,
			consume.PropPath:     x.req.Path,
			consume.PropStream:   stream,
			consume.PropCost:     "1",
			consume.PropEnqueued: strconv.FormatInt(x.admitted.UnixNano(), 10),
		},
	}
}

// finish settles the token account and reports the outcome.
func (s *Server) finish(x *exchange, outcome string) {
	x.log.outcome = outcome
	if x.pending != nil && !x.pending.Dispatched() {
		// The client left (or timed out) while queued. Its message stays
		// in the LiteTopic until the consumer drops it, but it no longer
		// counts in the bucket's backlog: it will take no slot, and the
		// predicted wait and queue positions of the others should not
		// include it.
		s.cfg.Buckets.Cancel(x.ticket)
	}
	if x.adm.Allowed {
		switch {
		case x.pending == nil || !x.pending.Dispatched():
			// The request never reached the model: nothing to charge.
			s.cfg.Admitter.Refund(x.adm.Reservation)
		case x.usage >= 0:
			s.cfg.Admitter.Reconcile(x.adm.Reservation, x.usage)
		}
		// Otherwise (dispatched, usage unknown) the reservation stands:
		// the model may have spent up to that much.
	}
	s.cfg.Observer.Request(x.key.Tenant, x.key.Model, outcome)
}

func outcomeOf(e *APIError) string {
	if e.Status == http.StatusTooManyRequests {
		return OutcomeRejected
	}
	return OutcomeUnavailable
}

func (s *Server) serves(model string) bool {
	for _, m := range s.cfg.Models {
		if m == model {
			return true
		}
	}
	return s.cfg.Pool.Serves(model)
}
