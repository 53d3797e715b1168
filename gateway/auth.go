package gateway

import (
	"net/http"
	"strings"

	"github.com/pacegate/pacegate/policy"
)

// authenticate finds the tenant of the request's bearer key.
func (s *Server) authenticate(r *http.Request) (*policy.Tenant, *APIError) {
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return nil, errAuth("You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.")
	}
	t, found := s.cfg.Table.Authenticate(strings.TrimSpace(key))
	if !found {
		return nil, errAuth("Incorrect API key provided.")
	}
	return t, nil
}
