package gateway

import (
	"net/http"

	"github.com/pacegate/pacegate/policy"
)

// authenticate finds the tenant of the request's key, sent the way the
// route's dialect sends it.
func (s *Server) authenticate(r *http.Request, d dialect) (*policy.Tenant, *APIError) {
	key, ok := d.apiKey(r)
	if !ok {
		return nil, errAuth(d.missingKey())
	}
	t, found := s.cfg.Table.Authenticate(key)
	if !found {
		return nil, errAuth("Incorrect API key provided.")
	}
	return t, nil
}
