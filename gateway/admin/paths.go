package admin

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/pacegate/pacegate/policy"
)

// rest returns the part of the request's escaped path after prefix,
// unescaped. The escaped path is used so that a tenant id holding "/"
// (sent as %2F) is not split.
func rest(r *http.Request, prefix string) (string, *apiError) {
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok || raw == "" {
		return "", notFound("Unknown path "+r.URL.Path+".", "", "unknown_url")
	}
	s, err := url.PathUnescape(raw)
	if err != nil {
		return "", badField("path", "invalid escape: %v", err)
	}
	return s, nil
}

// bucketKey parses /admin/buckets/{tenant}/{model...}: the tenant is the
// first (escaped) segment and the model all that follows, slashes
// included.
func bucketKey(r *http.Request) (policy.Key, *apiError) {
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), "/admin/buckets/")
	tenant, model, found := strings.Cut(raw, "/")
	if !ok || !found || tenant == "" || model == "" {
		return policy.Key{}, notFound("Use /admin/buckets/{tenant}/{model}.", "", "unknown_url")
	}
	t, err1 := url.PathUnescape(tenant)
	m, err2 := url.PathUnescape(model)
	if err1 != nil || err2 != nil {
		return policy.Key{}, badField("path", "invalid escape")
	}
	return policy.Key{Tenant: t, Model: m}, nil
}
