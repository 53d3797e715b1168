package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// exchange is one request in flight: what the handler knows about it from
// admission to the last byte. Only the handler's goroutine touches it.
type exchange struct {
	id       string
	rt       *route
	tenant   *policy.Tenant
	key      policy.Key
	req      *apiRequest
	admitted time.Time
	adm      policy.Admission
	pending  *consume.Pending
	ctx      context.Context
	log      *accessEntry

	firstByte time.Time
	upstream  string      // the upstream that answered
	learned   bool        // the response id was remembered
	status    int         // a JSON answer's status (non-streamed requests)
	header    http.Header // a JSON answer's headers
	wroteBody bool        // that answer was sent

	// call is what goes upstream (upstreamRequest), and queued the
	// request's Pending on the queue (submit): kept here, in the
	// exchange's one allocation, rather than two more of their own, one of
	// them on the queue's hop.
	call   consume.Request
	queued consume.Pending
	// What a stream's every chunk touches, from the end of the Pending
	// (its meter's count, then its sink) and the tally's count (its
	// last field) through the sink's first fields: one region of memory
	// (see responseSink).
	tally     consume.Tally // the response's usage, in the route's shape
	wroteDone bool          // a stream's end ([DONE]) was sent with its last chunk
	sink      responseSink  // its response's writing state (openSink), in the same allocation
}

// serve serves one route of the table. It reads straight: authenticate,
// parse and admit (decisions only), submit to the queue (or forward at
// once for a direct route), respond. Every refusal goes out through
// refuse.
func (s *Server) serve(rt *route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, e := s.admit(r, rt)
		if x != nil {
			rt.dialect.setRateLimitHeaders(w.Header(), x.adm, x.admitted)
		}
		if e != nil {
			s.refuse(w, rt, x, e)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		stopCut := context.AfterFunc(s.cut, cancel) // the cut ends the request's context
		defer stopCut()
		x.ctx = ctx
		sink := s.openSink(w, x)
		if rt.kind == kindQueued {
			if e := s.submit(x, sink); e != nil {
				s.refuse(sink.w, rt, x, e)
				return
			}
			defer s.cfg.Queue.Finish(x.pending)
		} else {
			p, wait := consume.Direct(ctx, s.upstreamRequest(x), s.cfg.Direct.Forward)
			x.pending = p
			defer func() { cancel(); wait() }()
		}
		s.finish(x, s.respond(r, x, sink))
	}
}

// admit authenticates, parses and checks the caps and the predicted wait.
// It decides and writes nothing: a refusal comes back as an *APIError,
// with the exchange when the request got as far as admission (so that
// its reservation is settled and its headers sent).
func (s *Server) admit(r *http.Request, rt *route) (*exchange, *APIError) {
	if s.draining.Load() {
		return nil, errUnavailable("pacegate is shutting down; retry on another replica.")
	}
	tenant, e := s.authenticate(r, rt.dialect)
	if e != nil {
		return nil, e
	}
	req, e := s.parse(r, rt, tenant.ID)
	if e != nil {
		return nil, e
	}
	log := accessEntryFrom(r.Context())
	log.tenant, log.model = tenant.ID, req.Model
	if rt.kind != kindFollowUp && !s.serves(req.Model) {
		return nil, errModelNotFound(req.Model)
	}
	if req.PreviousID != "" {
		p, e := s.pinTo(req.PreviousID, tenant.ID, "previous_response_id")
		if e != nil {
			return nil, e
		}
		req.Upstream = p.upstream
	}
	x := &exchange{id: requestIDFrom(r.Context()), rt: rt, tenant: tenant, key: policy.Key{Tenant: tenant.ID, Model: req.Model},
		req: req, admitted: time.Now(), log: log, tally: consume.Tally{Shape: rt.shape}}
	x.adm = s.cfg.Admitter.Admit(tenant, req.Model, s.reservation(rt, req))
	if !x.adm.Allowed {
		return x, rateLimitError(x)
	}
	if rt.kind != kindQueued {
		return x, nil
	}
	if wait, over := s.predictedWait(x.key); over > 0 {
		return x, maxWaitError(x, wait, s.cfg.Table.Limits(x.key).MaxWait, over)
	}
	return x, nil
}

// parse reads and checks the request of route rt: a JSON or multipart
// body, or, for a follow-up, the stored response it names.
func (s *Server) parse(r *http.Request, rt *route, tenant string) (*apiRequest, *APIError) {
	switch {
	case rt.kind == kindFollowUp:
		return s.followUp(r, rt, tenant)
	case rt.form:
		body, ct, e := readForm(r, s.cfg.MaxBodyBytes)
		if e != nil {
			return nil, e
		}
		return parseForm(body, ct, rt)
	}
	body, e := readBody(r, s.cfg.MaxBodyBytes)
	if e != nil {
		return nil, e
	}
	req, e := parseAPIRequest(body, rt)
	if e != nil {
		return nil, e
	}
	if rt.dialect == dialectAnthropic {
		req.Header = anthropicHeaders(r.Header)
	}
	if rt.prompt != nil && s.cfg.PrefixBytes > 0 {
		c := promptChain(rt.prompt, req.fields, req.Model, s.cfg.PrefixBytes)
		req.Prefix, req.PromptBytes = c.Hashes, c.Bytes
	}
	req.fields = nil
	return req, nil
}

// anthropicHeaders are the request headers an Anthropic route passes
// upstream: the API version and beta flags the client asked for.
func anthropicHeaders(h http.Header) http.Header {
	var out http.Header
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		if v := h.Values(k); len(v) > 0 {
			if out == nil {
				out = http.Header{}
			}
			out[k] = v
		}
	}
	return out
}

// reservation is the token cost reserved at admission.
func (s *Server) reservation(rt *route, req *apiRequest) int64 {
	switch rt.charge {
	case chargeRequest:
		return 0
	case chargeInput:
		return req.PromptTokens
	}
	return req.PromptTokens + s.expectedCompletion(rt, req)
}

// expectedCompletion is what a request is expected to generate: its
// output limit, or the default reservation when it sets none; nothing
// for a route that generates nothing.
func (s *Server) expectedCompletion(rt *route, req *apiRequest) int64 {
	switch {
	case rt.charge != chargeGeneration:
		return 0
	case req.MaxTokens > 0:
		return req.MaxTokens
	}
	return s.cfg.DefaultCompletionTokens
}

// predictedWait estimates how long the bucket's backlog takes to drain at
// its effective rate. over > 0 is by how much it exceeds max_wait, which
// is also when a retry could fit.
func (s *Server) predictedWait(k policy.Key) (wait, over time.Duration) {
	backlog := s.cfg.Queue.Backlog(k)
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

// upstreamRequest is what the consumer (or a direct forward) sends
// upstream for x: x.call, filled in.
func (s *Server) upstreamRequest(x *exchange) *consume.Request {
	x.call = consume.Request{
		ID: x.id, Key: x.key, Path: x.req.Path, Body: x.req.Body, Stream: x.req.Stream,
		Method: x.req.Method, ContentType: x.req.ContentType, Header: x.req.Header, Upstream: x.req.Upstream, Shape: x.rt.shape,
		Prefix: x.req.Prefix, PromptBytes: x.req.PromptBytes,
		Band: x.tenant.Priority.Band(), Weight: x.tenant.Weight, PromptTokens: x.req.PromptTokens,
		CompletionTokens: s.expectedCompletion(x.rt, x.req), MaxBacklog: s.cfg.Table.Limits(x.key).Backlog, Submitted: x.admitted,
	}
	return &x.call
}

// submit hands the request to the queue; its response goes to sink,
// which learns its Pending (Attach) before it is published.
func (s *Server) submit(x *exchange, sink *responseSink) *APIError {
	err := s.cfg.Queue.SubmitInto(x.ctx, &x.queued, s.upstreamRequest(x), sink)
	if err == nil {
		return nil
	}
	if full, ok := consume.IsFull(err); ok {
		retry := full.RetryAfter
		if full.Scope == consume.ScopeBucket {
			retry = time.Duration(float64(time.Second) / max(s.cfg.Pacer.EffectiveRate(x.key), 1e-9))
		}
		return queueFull(x, full, retry)
	}
	s.cfg.Logger.Warn("publish failed", "request_id", x.id, "err", err)
	e := errUnavailable("The request queue is unavailable; please retry shortly.")
	e.RetryAfter = time.Second
	return e
}

// refuse answers a request that will not be served: every 429 and every
// error before the queue goes out here, and is reported once.
func (s *Server) refuse(w http.ResponseWriter, rt *route, x *exchange, e *APIError) {
	if x != nil {
		if e.Status == http.StatusTooManyRequests {
			s.cfg.Observer.Rejected(x.key.Tenant, x.key.Model, e.Reason)
		}
		s.finish(x, outcomeOf(e))
	}
	rt.dialect.writeError(w, e)
}

// finish settles the token account and reports the outcome.
func (s *Server) finish(x *exchange, outcome string) {
	x.log.outcome = outcome
	if x.adm.Allowed {
		switch {
		case x.pending == nil || !x.pending.Dispatched():
			// The request never reached the model: nothing to charge.
			s.cfg.Admitter.Refund(x.adm.Reservation)
		case x.rt.charge == chargeRequest:
			// Nothing was reserved, and nothing is charged.
		case x.tally.Final || (x.req.Stream && (x.tally.Known || x.tally.Streamed > 0)):
			// The reported usage; or, for a stream cut short, what it
			// produced (the prompt, and the tokens streamed so far).
			s.cfg.Admitter.Reconcile(x.adm.Reservation, x.tally.Charge(x.req.PromptTokens))
		}
		// Otherwise (dispatched, nothing known) the reservation stands:
		// the model may have spent up to that much.
	}
	s.cfg.Observer.Request(x.key.Tenant, x.key.Model, outcome)
}

func outcomeOf(e *APIError) string {
	switch e.Status {
	case http.StatusTooManyRequests:
		return OutcomeRejected
	case http.StatusServiceUnavailable:
		return OutcomeUnavailable
	default:
		return OutcomeUpstreamError
	}
}

func (s *Server) serves(model string) bool {
	for _, m := range s.cfg.Models {
		if m == model {
			return true
		}
	}
	return s.cfg.Pool.Serves(model)
}

// bandMaxWait is how long x may wait in its bucket before its band's
// max_wait turns the wait into a 429 (0: no bound).
func (s *Server) bandMaxWait(x *exchange) time.Duration {
	if s.cfg.BandMaxWait == nil {
		return 0
	}
	return s.cfg.BandMaxWait(x.tenant.Priority)
}

func bandWaitError(x *exchange, d time.Duration) *APIError {
	e := queueError(x, fmt.Sprintf("the %s-priority band's max_wait of %s passed before the pool could take it", x.tenant.Priority, d))
	e.Reason = "BAND_MAX_WAIT"
	e.RetryAfter = d
	return e
}
