package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/pacegate/pacegate/consume/upstream"
)

// upstreamErr is the error the client sees for what ended x on the
// consumer side; the log gets the cause, which the client's message
// names only in allowlisted words.
func (s *Server) upstreamErr(x *exchange, err error) *APIError {
	e := routeUpstreamError(x, err)
	level := slog.LevelWarn
	if e.Status < http.StatusInternalServerError {
		level = slog.LevelInfo // the client's mistake, passed through
	}
	s.cfg.Logger.LogAttrs(context.Background(), level, "upstream error", slog.String("request_id", x.id),
		slog.String("path", x.rt.path), slog.Int("status", e.Status), slog.String("cause", err.Error()))
	return e
}

// routeUpstreamError is upstreamError with what the route knows: a route
// the upstream does not serve (its 404 or 405 without an error object,
// or vLLM's 501 for an API the loaded model lacks) is a 404 that says
// so, and a stored response whose upstream left the pool is not found.
func routeUpstreamError(x *exchange, err error) *APIError {
	if errors.Is(err, upstream.ErrPinnedGone) {
		return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: "The stored response was not found: the model server that stored it has left the pool."}
	}
	if x.rt.shape.Named() && errors.Is(err, upstream.ErrStreamMalformed) && !errors.Is(err, upstream.ErrBodyNotJSON) {
		return errUpstream("The model server's stream was malformed (not JSON, or it ended before its last event).")
	}
	var se *upstream.StatusError
	if errors.As(err, &se) {
		pass := passThrough(se)
		notServed := se.Status == http.StatusNotImplemented ||
			(pass == nil && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed))
		if notServed {
			return errNotServed(x.rt, x.key.Model)
		}
	}
	return upstreamError(err)
}

// errNotServed is the 404 of a route the pool does not serve for model.
func errNotServed(rt *route, model string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
		Message: "No model server in the pool serves " + rt.method + " " + rt.path + " for the model `" + model + "`."}
}
