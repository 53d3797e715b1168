package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// apiError is an admin error; writeError renders it in the OpenAI shape.
type apiError struct {
	status int
	msg    string
	param  string // the offending field; "" = null
	code   string
}

func (e *apiError) Error() string { return e.msg }

func badField(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: param + ": " + fmt.Sprintf(format, args...), param: param}
}

func notFound(msg, param, code string) *apiError {
	return &apiError{status: http.StatusNotFound, msg: msg, param: param, code: code}
}

func writeError(w http.ResponseWriter, e *apiError) {
	typ := "invalid_request_error"
	if e.status >= 500 {
		typ = "server_error"
	}
	d := errorDetail{Message: e.msg, Type: typ}
	if e.param != "" {
		d.Param = &e.param
	}
	if e.code != "" {
		d.Code = &e.code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = encoder(w).Encode(map[string]errorDetail{"error": d})
}

// errorDetail is the OpenAI error object; param and code are null when
// empty, as OpenAI sends them.
type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = encoder(w).Encode(v) // only a vanished client fails here
}

// encoder writes JSON without HTML escaping: the bodies go to API
// clients and fetch(), never into HTML, and "> 0" reads better than
// "\u003e 0" in an error message.
func encoder(w io.Writer) *json.Encoder {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e
}

// maxBody bounds a request body; admin bodies are a few fields.
const maxBody = 64 << 10

// decodeFields reads a JSON object into raw fields, rejecting fields not
// in allowed, so that a typo is a 400 naming it instead of a silent no-op.
func decodeFields(r *http.Request, allowed ...string) (map[string]json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &apiError{status: http.StatusBadRequest, msg: "The body must be a JSON object: " + describe(err) + "."}
	}
	if dec.More() {
		return nil, &apiError{status: http.StatusBadRequest, msg: "The body must hold one JSON object."}
	}
	for name := range m {
		if !slices.Contains(allowed, name) {
			return nil, badField(name, "unknown field; allowed: %s", strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

func describe(err error) string {
	if err == nil {
		return "got null"
	}
	if errors.Is(err, io.EOF) {
		return "empty body"
	}
	return err.Error()
}
