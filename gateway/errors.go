package gateway

import (
	"encoding/json"
	"net/http"
	"time"
)

// APIError is an error in the OpenAI wire shape
// {"error":{"message","type","param","code"}} together with its HTTP status.
type APIError struct {
	Status  int
	Message string
	Type    string
	Param   string // empty: JSON null
	Code    string // empty: JSON null
	// RetryAfter, when positive, is sent as Retry-After and retry-after-ms.
	RetryAfter time.Duration
	// Reason is, for a 429, the policy reason reported to metrics
	// (RPM_LIMIT, QUEUE_FULL, MAX_WAIT, BAND_MAX_WAIT, ...). It is not sent.
	Reason string
}

func (e *APIError) Error() string { return e.Message }

// errorBody is the JSON envelope.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// MarshalBody renders the OpenAI error envelope.
func (e *APIError) MarshalBody() []byte {
	d := errorDetail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	b, _ := json.Marshal(errorBody{Error: d}) // cannot fail: strings only
	return b
}

func errInvalidRequest(msg, param string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Message: msg, Type: "invalid_request_error", Param: param}
}

func errAuth(msg string) *APIError {
	return &APIError{Status: http.StatusUnauthorized, Message: msg, Type: "invalid_request_error", Code: "invalid_api_key"}
}

func errModelNotFound(model string) *APIError {
	return &APIError{
		Status:  http.StatusNotFound,
		Message: "The model `" + model + "` does not exist.",
		Type:    "invalid_request_error",
		Param:   "model",
		Code:    "model_not_found",
	}
}

func errUnavailable(msg string) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Message: msg, Type: "server_error", Code: "service_unavailable"}
}

func errTimeout(msg string) *APIError {
	return &APIError{Status: http.StatusGatewayTimeout, Message: msg, Type: "timeout", Code: "timeout"}
}

func errUpstream(msg string) *APIError {
	return &APIError{Status: http.StatusBadGateway, Message: msg, Type: "server_error", Code: "upstream_error"}
}

func errShutdown() *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Message: "pacegate is shutting down and could not finish this request within its grace period.", Type: "server_error", Code: "server_shutdown"}
}
