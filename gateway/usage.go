package gateway

import (
	"bytes"
	"encoding/json"
)

// usageFields is the part of a chunk or body the gateway reads.
type usageFields struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   *struct {
		TotalTokens int64 `json:"total_tokens"`
	} `json:"usage"`
}

var usageKey = []byte(`"usage"`)

// usageOfChunk returns the total tokens a streamed chunk reports (-1 if
// none) and whether it is the usage-only chunk (choices: []) that ends a
// stream with include_usage. Chunks without a "usage" key are not decoded.
func usageOfChunk(data []byte) (total int64, usageOnly bool) {
	if !bytes.Contains(data, usageKey) {
		return -1, false
	}
	var f usageFields
	if json.Unmarshal(data, &f) != nil || f.Usage == nil {
		return -1, false
	}
	return f.Usage.TotalTokens, len(f.Choices) == 0
}

// usageOfBody returns the total tokens of a non-streamed response, -1 if
// it reports none.
func usageOfBody(body []byte) int64 {
	total, _ := usageOfChunk(body)
	return total
}
