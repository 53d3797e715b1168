package app

import (
	"net/http"
	"time"
)

// bodyDeadline gives each request's body d, from the end of its headers,
// to arrive in full (server.read_body_timeout): it sets the connection's
// read deadline before next runs. A body trickled slower fails with
// os.ErrDeadlineExceeded, which the gateway answers with 408, and
// net/http closes the connection.
//
// net/http itself clears the deadline once the body has been read to its
// end (its background read, which watches for the client going away,
// starts with no deadline), so a stream answered for minutes after a
// quick body is not cut by it; TestBodyDeadlineClearedAfterTheBody holds
// it to that. A handler that never reads the body (a 401) leaves the
// deadline set, and it then bounds net/http's discard of the unread body
// too; the next request on the connection starts with fresh deadlines.
//
// It is not http.Server.ReadTimeout, which counts from the first byte of
// the headers: read_header_timeout and read_body_timeout each bound their
// own part.
func bodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)) // fails only on a non-net/http writer
		}
		next.ServeHTTP(w, r)
	})
}
