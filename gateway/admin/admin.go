package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/gateway/control"
	"github.com/pacegate/pacegate/policy"
)

// Buckets is what the admin API reads of the queue (implemented by
// *consume.Queue).
type Buckets interface {
	List(q consume.ListQuery) ([]consume.BucketStat, int)
	Stat(k policy.Key) (consume.BucketStat, bool)
}

// Fairness is what the admin API reads of the fair-share scheduler
// (implemented by *fairshare.Scheduler).
type Fairness interface {
	Flow(k policy.Key, now time.Time) (fairshare.FlowStat, bool)
	Models(now time.Time) []fairshare.ModelStat
}

// Config wires the admin API. Token, Table, Pacer and Buckets are
// required.
type Config struct {
	// Token is the bearer token every API route requires.
	Token   string
	Table   *policy.Table
	Pacer   *policy.Pacer
	Buckets Buckets
	// Fairness reports each bucket's attained service and share and each
	// model's fairness. Nil means none is reported.
	Fairness Fairness
	// Models lists the models the gateway serves (the pool's and the
	// config's); a model outside it is a 404. Nil means any model name
	// is accepted.
	Models func() []string
	// Control is the closed loop. If nil (control disabled), pins are
	// still recorded, so the API behaves the same, but nothing moves the
	// factors except this API.
	Control *control.Loop
	// Upstreams reports the upstreams' limits and health. Nil means
	// GET /admin/upstreams lists none.
	Upstreams func() []upstream.UpstreamStat
	// Metrics serves /metrics. Nil means no /metrics route.
	Metrics http.Handler
	// Logger logs every change made through the API. Nil means
	// slog.Default().
	Logger *slog.Logger
	// AuthBurst, AuthRefill and AuthMaxSources slow down wrong tokens
	// per source address (admin.auth_*; see authLimiter). Zero means
	// DefaultAuthBurst, DefaultAuthRefill and DefaultAuthMaxSources.
	AuthBurst      int
	AuthRefill     time.Duration
	AuthMaxSources int
}

// api holds the handlers' dependencies. It is safe for concurrent use:
// the policy types are, and pins serialises itself.
type api struct {
	cfg    Config
	digest [32]byte // sha256 of the token: compared in constant time
	tries  *authLimiter
	pins   pinner
	log    *slog.Logger
	mu     sync.Mutex // serialises the read-modify-write of overrides
}

// New returns the admin API handler. It panics when a required field is
// missing: that is a wiring bug, found at startup.
func New(cfg Config) http.Handler {
	if cfg.Token == "" || cfg.Table == nil || cfg.Pacer == nil || cfg.Buckets == nil {
		panic("admin: Config.Token, Table, Pacer and Buckets are required")
	}
	a := &api{cfg: cfg, digest: sha256.Sum256([]byte(cfg.Token)), log: cfg.Logger,
		tries: newAuthLimiter(cfg.AuthBurst, cfg.AuthRefill, cfg.AuthMaxSources)}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.pins = newPinner(cfg.Control, cfg.Pacer)
	return a.routes()
}

func (a *api) routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/admin/ui", serveUI)
	r.Get("/admin/ui/", serveUI)
	r.Group(func(r chi.Router) {
		r.Use(a.auth)
		if a.cfg.Metrics != nil {
			r.Method(http.MethodGet, "/metrics", a.cfg.Metrics)
		}
		r.Get("/admin/buckets", a.listBuckets)
		r.Get("/admin/buckets/*", a.getBucket)
		r.Put("/admin/buckets/*", a.putBucket)
		r.Delete("/admin/buckets/*", a.deleteBucket)
		r.Get("/admin/tenants/*", a.getTenant)
		r.Put("/admin/tenants/*", a.putTenant)
		r.Delete("/admin/tenants/*", a.deleteTenant)
		r.Get("/admin/factors", a.getFactors)
		r.Put("/admin/factors/global", a.putGlobal)
		r.Put("/admin/factors/models/*", a.putColumn)
		r.Delete("/admin/factors/models/*", a.deleteColumn)
		r.Get("/admin/control", a.getControl)
		r.Get("/admin/fairness", a.getFairness)
		r.Get("/admin/upstreams", a.getUpstreams)
		r.Get("/admin/matrix", a.getMatrix)
		r.Get("/debug/pprof/sampling", a.getSampling)
		r.Put("/debug/pprof/sampling", a.putSampling)
		pprofRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("Unknown path "+r.URL.Path+".", "", "unknown_url"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "Method " + r.Method + " is not allowed on " + r.URL.Path + "."})
	})
	return r
}

// auth requires the bearer token. Both sides are hashed first, so the
// comparison takes the same time whatever the presented token's length.
// A source that sent too many wrong tokens gets 429 with Retry-After
// before its token is looked at (authLimiter).
func (a *api) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		try, wait := a.tries.reserve(now, sourceOf(r.RemoteAddr))
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
			writeError(w, errTooManyTries)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		d := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(d[:], a.digest[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pacegate-admin"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, msg: "Missing or invalid admin token.", code: "invalid_admin_token"})
			return
		}
		a.tries.refund(now, try)
		next.ServeHTTP(w, r)
	})
}

var errTooManyTries = &apiError{status: http.StatusTooManyRequests,
	msg: "Too many wrong admin tokens from this address; retry after the time in Retry-After.", code: "too_many_admin_token_failures"}
