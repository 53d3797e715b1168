package admin

import (
	"net/http"
	"time"
)

type fairnessJSON struct {
	Object string          `json:"object"` // "list"
	Data   []modelFairJSON `json:"data"`
}

// modelFairJSON is one model's fair share of a saturated pool.
type modelFairJSON struct {
	Model string `json:"model"`
	// Jain is Jain's index over the recent weighted service of the
	// buckets that competed for the pool: 1 = served alike.
	Jain      float64        `json:"jain"`
	Competing int            `json:"competing"`
	Waiting   map[string]int `json:"waiting"` // buckets waiting for a slot, by band
	Grants    map[string]int `json:"grants"`  // slots granted to waiting buckets, by band
}

var bandNames = [...]string{"high", "normal", "low"}

// getFairness serves GET /admin/fairness: per model, how fairly the pool
// has been shared among the buckets competing for it.
func (a *api) getFairness(w http.ResponseWriter, _ *http.Request) {
	out := fairnessJSON{Object: "list", Data: []modelFairJSON{}}
	if a.cfg.Fairness != nil {
		for _, m := range a.cfg.Fairness.Models(time.Now()) {
			mj := modelFairJSON{Model: m.Model, Jain: round3(m.Jain), Competing: m.Competing,
				Waiting: map[string]int{}, Grants: map[string]int{}}
			for b, name := range bandNames {
				mj.Waiting[name] = m.Waiting[b]
				mj.Grants[name] = int(m.Grants[b])
			}
			out.Data = append(out.Data, mj)
		}
	}
	writeJSON(w, out)
}
