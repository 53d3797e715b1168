package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/pacegate/pacegate/consume/upstream"
)

// upstreamError maps what ended a request on the consumer side to the
// error the client sees. Only allowlisted details reach the client: an
// upstream's own OpenAI-shaped 4xx body (the client's mistake, e.g. a
// context-length error) is passed through; everything else is a generic
// message, and the full error goes to the log.
func upstreamError(err error) *APIError {
	var se *upstream.StatusError
	switch {
	case errors.As(err, &se):
		if e := passThrough(se); e != nil {
			return e
		}
		return errUpstream("The model server answered " + http.StatusText(se.Status) + ".")
	case errors.Is(err, upstream.ErrStreamStalled):
		return errUpstream("The model server's stream stalled: it sent nothing within its idle timeout.")
	case errors.Is(err, upstream.ErrBodyNotJSON):
		return errUpstream("The model server's response body is not JSON, although its Content-Type says it is.")
	case errors.Is(err, upstream.ErrBodyTooLarge):
		return errUpstream("The model server's response body exceeds the gateway's size limit.")
	case errors.Is(err, upstream.ErrStreamMalformed):
		return errUpstream("The model server's stream was malformed (not JSON, or it ended without [DONE]).")
	case errors.Is(err, upstream.ErrStreamBroken):
		return errUpstream("The model server's stream broke off before it finished.")
	case errors.Is(err, upstream.ErrUpstreamUnavailable):
		return errUnavailable("No model server could take the request.")
	default:
		return errUpstream("The request to the model server failed.")
	}
}

// passThrough keeps an upstream 4xx that carries an OpenAI error object.
func passThrough(se *upstream.StatusError) *APIError {
	if se.Status < 400 || se.Status >= 500 {
		return nil
	}
	var body struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(se.Body, &body) != nil || body.Error == nil {
		return nil
	}
	e := &APIError{Status: se.Status, Message: body.Error.Message, Type: body.Error.Type}
	if p, ok := body.Error.Param.(string); ok {
		e.Param = p
	}
	if c, ok := body.Error.Code.(string); ok {
		e.Code = c
	}
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	return e
}
