package admin

import (
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// pprofRoutes serves the Go runtime's profiles under /debug/pprof/, as
// net/http/pprof serves them and `go tool pprof` reads them, behind the
// admin token like every other route here: an operator profiles the
// gateway under its real load without a build of their own. The command
// line is not served: its flags and paths are not a profile's business.
// (Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux; pacegate never serves that mux.)
func pprofRoutes(r chi.Router) {
	r.Get("/debug/pprof/", pprof.Index)
	r.Get("/debug/pprof/profile", pprof.Profile) // ?seconds=N, 30 by default
	r.Get("/debug/pprof/trace", pprof.Trace)
	r.Get("/debug/pprof/symbol", pprof.Symbol)
	r.Post("/debug/pprof/symbol", pprof.Symbol)
	r.Get("/debug/pprof/{name}", serveNamedProfile)
}

// serveNamedProfile serves one of runtime/pprof's profiles (heap, allocs,
// goroutine, block, mutex, threadcreate), or a 404 in the API's shape.
func serveNamedProfile(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if rpprof.Lookup(name) == nil {
		writeError(w, notFound("Unknown profile "+strconv.Quote(name)+"; GET /debug/pprof/ lists them.", "", "unknown_profile"))
		return
	}
	pprof.Handler(name).ServeHTTP(w, r)
}
