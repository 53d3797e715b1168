package admin

import (
	"net/http"

	"github.com/pacegate/pacegate/policy"
)

type tenantJSON struct {
	ID       string       `json:"id"`
	Priority string       `json:"priority"`
	Weight   float64      `json:"weight"`
	Limits   limitsJSON   `json:"limits"`   // live tenant-level limits (config + override)
	Override overrideJSON `json:"override"` // what the admin API changed
}

// tenantFromPath returns the tenant named by the rest of the path, or a
// 404.
func (a *api) tenantFromPath(r *http.Request) (*policy.Tenant, *apiError) {
	id, e := rest(r, "/admin/tenants/")
	if e != nil {
		return nil, e
	}
	t, ok := a.cfg.Table.Tenant(id)
	if !ok {
		return nil, notFound("Unknown tenant '"+id+"'.", "tenant", "tenant_not_found")
	}
	return t, nil
}

func (a *api) tenantBody(t *policy.Tenant) tenantJSON {
	_, overrides := a.cfg.Table.Overrides()
	return tenantJSON{ID: t.ID, Priority: t.Priority.String(), Weight: t.Weight,
		Limits: toLimitsJSON(tenantLimits(a.cfg.Table, t.ID)), Override: toOverrideJSON(overrides[t.ID])}
}

func (a *api) getTenant(w http.ResponseWriter, r *http.Request) {
	t, e := a.tenantFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, a.tenantBody(t))
}

func (a *api) putTenant(w http.ResponseWriter, r *http.Request) {
	t, e := a.tenantFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	fields, e := decodeFields(r, overrideFields...)
	if e != nil {
		writeError(w, e)
		return
	}
	a.mu.Lock() // read-modify-write of the override
	defer a.mu.Unlock()
	_, overrides := a.cfg.Table.Overrides()
	o, e := patch(overrides[t.ID], fields)
	if e != nil {
		writeError(w, e)
		return
	}
	a.setTenant(w, t, o)
}

func (a *api) deleteTenant(w http.ResponseWriter, r *http.Request) {
	t, e := a.tenantFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.setTenant(w, t, policy.Override{})
}

// setTenant stores o. Requires a.mu held.
func (a *api) setTenant(w http.ResponseWriter, t *policy.Tenant, o policy.Override) {
	if err := a.cfg.Table.SetTenantOverride(t.ID, o); err != nil {
		// The tenant vanished in a concurrent reload.
		writeError(w, notFound(err.Error(), "tenant", "tenant_not_found"))
		return
	}
	a.log.Info("admin: tenant override set", "tenant", t.ID, "override", toOverrideJSON(o).String())
	writeJSON(w, a.tenantBody(t))
}
