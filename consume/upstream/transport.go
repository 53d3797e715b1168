package upstream

import (
	"net"
	"net/http"
	"time"
)

// newTransport is the default Transport: no proxy from the environment
// (upstreams are internal), no compression (bytes pass through as they
// come), and enough idle connections per host for every slot, since each
// stream holds a connection. No response-header timeout: a non-streamed
// vLLM response sends its headers only when generation is over; the
// caller's ctx bounds the call.
func newTransport(maxPerHost int) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4 * maxPerHost,
		MaxIdleConnsPerHost:   maxPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}
