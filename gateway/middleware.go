package gateway

import (
	"context"
	"net/http"
)

// The Server's middleware are free functions of the chi shape,
// func(http.Handler) http.Handler, built once in [Server.routes]:
//
//	requestID → accessLog → recoverer → route
//
// Each one that hands something to the handlers keeps it under its own
// context key and offers one accessor (requestIDFrom, accessEntryFrom);
// none reaches into another's writer or value. The access log sits
// outside the recoverer, so the 500 the recoverer writes for a panic
// goes through the access log's writer and is logged like any answer.

// ctxKey is a context key of this package; each value has its own, so
// that no two middleware share one (chi's contextKey).
type ctxKey struct{ name string }

func (k *ctxKey) String() string { return "gateway context value " + k.name }

var requestIDKey = &ctxKey{"request id"}

// requestID gives every request a fresh id from newID, in the context
// (requestIDFrom) and in the response headers of the path's dialect
// (X-Request-Id; request-id too on Anthropic paths). A client-sent
// id is not trusted: it would let one tenant collide with another's
// registry entry.
func requestID(newID func() string) func(http.Handler) http.Handler {
	if newID == nil {
		panic("gateway: requestID needs an id generator")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := newID()
			dialectOf(r.URL.Path).setRequestID(w.Header(), id)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
		})
	}
}

// requestIDFrom returns the id requestID gave the request, or "" outside
// that middleware.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}
