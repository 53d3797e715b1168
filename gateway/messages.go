package gateway

import "encoding/json"

// messagesFields checks an Anthropic Messages request: messages and
// max_tokens are required (as the Messages API has them), and the
// reservation is the prompt estimate (messages, system, tools) plus
// max_tokens.
func messagesFields(fields map[string]json.RawMessage, req *apiRequest) *APIError {
	if e := inputs([]string{"system", "tools"}, "messages")(fields, req); e != nil {
		return e
	}
	if e := decodeLimits(fields, req, "max_tokens"); e != nil {
		return e
	}
	if req.MaxTokens == 0 {
		return errInvalidRequest("Missing required parameter: 'max_tokens'.", "max_tokens")
	}
	return nil
}
