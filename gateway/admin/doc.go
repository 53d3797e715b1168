// Package admin is pacegate's operator API, served on its own listener
// (admin.listen, default 127.0.0.1:9090) and only when an admin token is
// configured.
//
// Every route except the bucket matrix page (/admin/ui, static and free of
// data) requires "Authorization: Bearer <token>", compared in constant
// time. Wrong tokens are slowed down per source address (the address, or
// the /64 of an IPv6 one): after admin.auth_burst of them the source
// earns one more try per admin.auth_refill, and until then gets 429 with
// Retry-After, its token unchecked; at most admin.auth_max_sources
// addresses are remembered (authLimiter). Errors use the OpenAI shape {"error":{"message","type","param",
// "code"}}: 400 names the offending field in param, 404 is an unknown
// tenant or model.
//
//	GET    /admin/buckets?tenant=&model=&state=&sort=&offset=&limit=
//	GET    /admin/buckets/{tenant}/{model...}
//	PUT    /admin/buckets/{tenant}/{model...}   {"rate":5,"burst":10}  (null clears a field)
//	DELETE /admin/buckets/{tenant}/{model...}   remove the bucket's override
//	GET    /admin/tenants/{tenant...}
//	PUT    /admin/tenants/{tenant...}           {"rpm":600,"rate":2,"max_wait":"20s"}
//	DELETE /admin/tenants/{tenant...}
//	GET    /admin/factors
//	PUT    /admin/factors/global                {"factor":1.5}
//	PUT    /admin/factors/models/{model...}     {"factor":0.5,"pin":true}
//	DELETE /admin/factors/models/{model...}     unpin: the control loop takes over again
//	GET    /admin/control                       what the closed loop last saw and did
//	GET    /admin/matrix?tenant=&offset=&limit= the tenants × models matrix the page draws
//	GET    /admin/ui                            the bucket matrix page
//	GET    /metrics                             Prometheus
//	GET    /debug/pprof/...                     the runtime's profiles (net/http/pprof; not the command line)
//	GET    /debug/pprof/sampling                the mutex and block profiles' sampling
//	PUT    /debug/pprof/sampling                {"mutex_fraction":10,"block_rate_ns":10000}  (0 = off)
//
// Model names may contain "/" (meta-llama/Llama-3-8B), so a model is
// always the trailing part of a path; a tenant id inside a bucket path is
// one URL-escaped segment (a "/" in it is sent as %2F).
//
// Every change applies at once, also to requests already queued: the
// pacer computes each pending release slot from the rate at the time of
// asking.
package admin
