package gateway

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
)

// maxFormFieldBytes bounds one text field of a multipart form.
const maxFormFieldBytes = 64 << 10

// parseForm checks an audio request (multipart/form-data, as the OpenAI
// SDKs send it): a model field and a file part are required; stream
// ("true") asks for SSE; max_completion_tokens bounds the text. The body is forwarded as it came, with its
// Content-Type (and boundary). Audio has no text prompt to estimate: the
// reservation is max_completion_tokens or the default output
// reservation, reconciled when the server reports token usage (a
// streamed answer's usage chunk; vLLM's JSON answer reports a duration,
// and then the reservation stands).
func parseForm(body []byte, contentType string, rt *route) (*apiRequest, *APIError) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return nil, errInvalidRequest("The multipart body has no boundary.", "")
	}
	req := &apiRequest{Path: rt.upstreamPath(), ContentType: contentType, WantsUsage: true, Body: body}
	var hasFile bool
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errInvalidRequest("The multipart body could not be parsed.", "")
		}
		if part.FormName() == "file" {
			hasFile = true
			continue
		}
		if e := formField(part, req); e != nil {
			return nil, e
		}
	}
	switch {
	case req.Model == "":
		return nil, errInvalidRequest("Missing required parameter: 'model'.", "model")
	case !hasFile:
		return nil, errInvalidRequest("Missing required parameter: 'file'.", "file")
	}
	return req, nil
}

// formField reads the text fields the gateway needs.
func formField(part *multipart.Part, req *apiRequest) *APIError {
	name := part.FormName()
	if name != "model" && name != "stream" && name != "max_completion_tokens" {
		return nil
	}
	v, err := io.ReadAll(io.LimitReader(part, maxFormFieldBytes+1))
	if err != nil || len(v) > maxFormFieldBytes {
		return errInvalidRequest("Invalid value for '"+name+"'.", name)
	}
	switch name {
	case "model":
		req.Model = string(v)
		return checkModel(req.Model)
	case "max_completion_tokens":
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 1 {
			return errInvalidRequest("Invalid value for 'max_completion_tokens': must be at least 1.", name)
		}
		req.MaxTokens = n
	default:
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return errInvalidRequest("Invalid value for 'stream': expected true or false.", "stream")
		}
		req.Stream = b
	}
	return nil
}

// readForm enforces the multipart content type and the size limit.
func readForm(r *http.Request, limit int64) ([]byte, string, *APIError) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" {
		return nil, "", &APIError{Status: http.StatusUnsupportedMediaType,
			Message: "Content-Type must be multipart/form-data, got " + quoteOrEmpty(ct), Type: "invalid_request_error"}
	}
	body, e := readLimited(r, limit)
	return body, ct, e
}
