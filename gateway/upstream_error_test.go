package gateway

import (
	"fmt"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream"
)

// A broken upstream stream reaches the client as an explicit
// upstream_error whose message says how it broke, and nothing of the
// upstream's address.
func TestUpstreamErrorBrokenStreams(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: http://10.0.0.7:8000: no event for 30s", upstream.ErrStreamStalled),
			`{"error":{"message":"The model server's stream stalled: it sent nothing within its idle timeout.","type":"server_error","param":null,"code":"upstream_error"}}`},
		{fmt.Errorf("%w: http://10.0.0.7:8000: the stream ended without [DONE]", upstream.ErrStreamMalformed),
			`{"error":{"message":"The model server's stream was malformed (not JSON, or it ended without [DONE]).","type":"server_error","param":null,"code":"upstream_error"}}`},
		{fmt.Errorf("%w: http://10.0.0.7:8000: Content-Type \"application/json\"", upstream.ErrBodyNotJSON),
			`{"error":{"message":"The model server's response body is not JSON, although its Content-Type says it is.","type":"server_error","param":null,"code":"upstream_error"}}`},
		{fmt.Errorf("%w: http://10.0.0.7:8000: 10 bytes", upstream.ErrBodyTooLarge),
			`{"error":{"message":"The model server's response body exceeds the gateway's size limit.","type":"server_error","param":null,"code":"upstream_error"}}`},
		{fmt.Errorf("%w: http://10.0.0.7:8000: reset", upstream.ErrStreamBroken),
			`{"error":{"message":"The model server's stream broke off before it finished.","type":"server_error","param":null,"code":"upstream_error"}}`},
	} {
		e := upstreamError(c.err)
		if got := string(e.MarshalBody()); e.Status != 502 || got != c.want {
			t.Errorf("%v: %d %s\nwant 502 %s", c.err, e.Status, got, c.want)
		}
	}
}
