package admin

import (
	"net/http"
	"strings"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// The matrix shows a page of tenants at a time: the page must stay
// small however many tenants are configured.
const (
	defaultMatrixTenants = 50
	maxMatrixTenants     = 200
)

type matrixJSON struct {
	Models       []columnJSON `json:"models"` // columns, with their factors
	GlobalFactor float64      `json:"global_factor"`
	Control      bool         `json:"control"`
	Tenants      []matrixRow  `json:"tenants"`
	TotalTenants int          `json:"total_tenants"` // matching the filter
	Offset       int          `json:"offset"`
	Limit        int          `json:"limit"`
}

type matrixRow struct {
	Tenant   string      `json:"tenant"`
	Priority string      `json:"priority"`
	Cells    []bucketRow `json:"cells"` // one per model, in column order
}

// getMatrix serves GET /admin/matrix?tenant=&offset=&limit=: a page of
// tenants (sorted by id; tenant= keeps ids containing the substring) by
// every served model.
func (a *api) getMatrix(w http.ResponseWriter, r *http.Request) {
	offset, limit, e := paging(r, defaultMatrixTenants, maxMatrixTenants)
	if e != nil {
		writeError(w, e)
		return
	}
	tenants := filterTenants(a.cfg.Table.Quotas().Tenants(), r.URL.Query().Get("tenant"))
	out := matrixJSON{Models: a.columns(), GlobalFactor: a.cfg.Pacer.GlobalFactor(),
		Control: a.cfg.Control != nil, Tenants: []matrixRow{}, TotalTenants: len(tenants), Offset: offset, Limit: limit}
	now := time.Now()
	for _, t := range page(tenants, offset, limit) {
		row := matrixRow{Tenant: t.ID, Priority: t.Priority.String(), Cells: make([]bucketRow, 0, len(out.Models))}
		for _, c := range out.Models {
			k := policy.Key{Tenant: t.ID, Model: c.Model}
			st, _ := a.cfg.Buckets.Stat(k)
			st.Key = k
			row.Cells = append(row.Cells, a.row(st, now))
		}
		out.Tenants = append(out.Tenants, row)
	}
	writeJSON(w, out)
}

func filterTenants(ts []*policy.Tenant, sub string) []*policy.Tenant {
	if sub == "" {
		return ts
	}
	out := ts[:0]
	for _, t := range ts {
		if strings.Contains(t.ID, sub) {
			out = append(out, t)
		}
	}
	return out
}

func page[T any](s []T, offset, limit int) []T {
	if offset >= len(s) {
		return nil
	}
	return s[offset:min(len(s), offset+limit)]
}
