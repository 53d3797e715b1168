package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// Paging of GET /admin/buckets.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

type listJSON struct {
	Object string      `json:"object"` // "list"
	Data   []bucketRow `json:"data"`
	Total  int         `json:"total"` // buckets matching the filters
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
}

// listBuckets serves GET /admin/buckets. Filters: tenant and model
// (substrings, or whole names with exact=true), state (idle, queued,
// suspended), nonempty=true; sort=backlog (default: largest first) or
// sort=key; offset and limit (1..1000, default 100).
func (a *api) listBuckets(w http.ResponseWriter, r *http.Request) {
	q, e := listQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	items, total := a.cfg.Buckets.List(q)
	out := listJSON{Object: "list", Data: make([]bucketRow, 0, len(items)), Total: total, Offset: q.Offset, Limit: q.Limit}
	now := time.Now()
	for _, st := range items {
		out.Data = append(out.Data, a.row(st, now))
	}
	writeJSON(w, out)
}

func listQuery(r *http.Request) (consume.ListQuery, *apiError) {
	v := r.URL.Query()
	offset, limit, e := paging(r, defaultListLimit, maxListLimit)
	if e != nil {
		return consume.ListQuery{}, e
	}
	q := consume.ListQuery{Tenant: v.Get("tenant"), Model: v.Get("model"), State: v.Get("state"),
		Sort: v.Get("sort"), Offset: offset, Limit: limit}
	switch q.State {
	case "", consume.StateIdle, consume.StateQueued, consume.StateSuspended:
	default:
		return q, badField("state", "must be idle, queued or suspended, got %q", q.State)
	}
	switch q.Sort {
	case "", consume.SortBacklog, consume.SortKey:
	default:
		return q, badField("sort", "must be backlog or key, got %q", q.Sort)
	}
	var ok bool
	if q.Exact, ok = boolParam(v.Get("exact")); !ok {
		return q, badField("exact", "must be true or false, got %q", v.Get("exact"))
	}
	if q.NonEmpty, ok = boolParam(v.Get("nonempty")); !ok {
		return q, badField("nonempty", "must be true or false, got %q", v.Get("nonempty"))
	}
	return q, nil
}

func boolParam(s string) (v, ok bool) {
	if s == "" {
		return false, true
	}
	v, err := strconv.ParseBool(s)
	return v, err == nil
}

// paging reads offset (>= 0) and limit (1..max, default def).
func paging(r *http.Request, def, maxLimit int) (offset, limit int, e *apiError) {
	v := r.URL.Query()
	offset, limit = 0, def
	if s := v.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, 0, badField("offset", "must be an integer >= 0, got %q", s)
		}
		offset = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return 0, 0, badField("limit", "must be an integer from 1 to %d, got %q", maxLimit, s)
		}
		limit = n
	}
	return offset, limit, nil
}
