package vllmsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// apiError is an OpenAI-shaped error response.
type apiError struct {
	status int
	typ    string
	msg    string
	param  string // empty: null
}

func badRequest(msg string, param *string) *apiError {
	e := &apiError{status: http.StatusBadRequest, typ: "BadRequestError", msg: msg}
	if param != nil {
		e.param = *param
	}
	return e
}

// statusError is the error body of an injected failure.
func statusError(status int) *apiError {
	return &apiError{status: status, typ: errorType(status),
		msg: fmt.Sprintf("Simulated failure (status %d).", status)}
}

func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return strings.ReplaceAll(http.StatusText(status), " ", "") + "Error"
}

func (e *apiError) write(w http.ResponseWriter) {
	param := "null"
	if e.param != "" {
		param = quote(e.param)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	fmt.Fprintf(w, `{"error":{"message":%s,"type":%s,"param":%s,"code":%d}}`, quote(e.msg), quote(e.typ), param, e.status)
}

// parseStatus reads an X-Sim-Fail-Status value; 0 if absent or invalid.
func parseStatus(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 100 || n > 999 {
		return 0
	}
	return n
}
