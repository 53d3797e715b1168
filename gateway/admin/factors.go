package admin

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"

	"github.com/pacegate/pacegate/gateway/control"
)

// maxFactor bounds a factor set by hand: beyond it a typo (150 for 1.5)
// would unpace a model.
const maxFactor = 1000

type factorsJSON struct {
	Global  float64      `json:"global"`
	Models  []columnJSON `json:"models"`
	Control bool         `json:"control"` // whether the closed loop runs
}

type columnJSON struct {
	Model  string  `json:"model"`
	Factor float64 `json:"factor"`
	Pinned bool    `json:"pinned"`
}

func (a *api) getFactors(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, factorsJSON{Global: a.cfg.Pacer.GlobalFactor(), Models: a.columns(), Control: a.cfg.Control != nil})
}

// columns returns every served model's column factor, sorted by model.
func (a *api) columns() []columnJSON {
	models := a.models()
	out := make([]columnJSON, 0, len(models))
	for _, m := range models {
		out = append(out, a.column(m))
	}
	return out
}

func (a *api) column(model string) columnJSON {
	return columnJSON{Model: model, Factor: a.cfg.Pacer.ColumnFactor(model), Pinned: a.pins.Pinned(model)}
}

// models returns the served models, sorted; nil when unknown.
func (a *api) models() []string {
	if a.cfg.Models == nil {
		return nil
	}
	ms := slices.Clone(a.cfg.Models())
	slices.Sort(ms)
	return slices.Compact(ms)
}

// checkModel is a 404 for a model the gateway does not serve.
func (a *api) checkModel(model string) *apiError {
	if a.cfg.Models == nil || slices.Contains(a.cfg.Models(), model) {
		return nil
	}
	return notFound("The model '"+model+"' does not exist.", "model", "model_not_found")
}

func (a *api) putGlobal(w http.ResponseWriter, r *http.Request) {
	fields, e := decodeFields(r, "factor")
	if e != nil {
		writeError(w, e)
		return
	}
	f, e := factorField(fields)
	if e != nil {
		writeError(w, e)
		return
	}
	old := a.cfg.Pacer.GlobalFactor()
	a.cfg.Pacer.SetGlobalFactor(f)
	a.log.Info("admin: global factor set", "from", old, "to", f)
	writeJSON(w, map[string]float64{"global": f})
}

func (a *api) putColumn(w http.ResponseWriter, r *http.Request) {
	model, f, pin, e := a.parseColumn(r)
	if e != nil {
		writeError(w, e)
		return
	}
	old := a.cfg.Pacer.ColumnFactor(model)
	if pin {
		a.pins.Pin(model, f)
	} else {
		a.pins.Set(model, f)
	}
	a.log.Info("admin: column factor set", "model", model, "from", old, "to", f, "pinned", pin)
	writeJSON(w, a.column(model))
}

// parseColumn reads PUT /admin/factors/models/{model...}.
func (a *api) parseColumn(r *http.Request) (model string, f float64, pin bool, e *apiError) {
	if model, e = rest(r, "/admin/factors/models/"); e != nil {
		return
	}
	if e = a.checkModel(model); e != nil {
		return
	}
	fields, e := decodeFields(r, "factor", "pin")
	if e != nil {
		return
	}
	if f, e = factorField(fields); e != nil {
		return
	}
	pin, e = pinField(fields)
	return
}

func (a *api) deleteColumn(w http.ResponseWriter, r *http.Request) {
	model, e := rest(r, "/admin/factors/models/")
	if e == nil {
		e = a.checkModel(model)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	a.pins.Unpin(model)
	a.log.Info("admin: column factor unpinned", "model", model, "factor", a.cfg.Pacer.ColumnFactor(model))
	writeJSON(w, a.column(model))
}

func factorField(fields map[string]json.RawMessage) (float64, *apiError) {
	raw, ok := fields["factor"]
	if !ok {
		return 0, badField("factor", "required")
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || !(f > 0) || f > maxFactor || math.IsInf(f, 0) {
		return 0, badField("factor", "must be a number > 0 and <= %d, got %s", maxFactor, raw)
	}
	return f, nil
}

func pinField(fields map[string]json.RawMessage) (bool, *apiError) {
	raw, ok := fields["pin"]
	if !ok {
		return false, nil
	}
	var pin bool
	if err := json.Unmarshal(raw, &pin); err != nil {
		return false, badField("pin", "must be true or false, got %s", raw)
	}
	return pin, nil
}

type controlJSON struct {
	Enabled bool                  `json:"enabled"`
	Config  *controlConfigJSON    `json:"config,omitempty"`
	Models  []control.ModelStatus `json:"models"`
}

type controlConfigJSON struct {
	Interval      string  `json:"interval"`
	WaitingTarget float64 `json:"waiting_target"`
	MinFactor     float64 `json:"min_factor"`
	MaxFactor     float64 `json:"max_factor"`
	Decrease      float64 `json:"decrease"`
	Increase      float64 `json:"increase"`
	Hysteresis    int     `json:"hysteresis"`
	DrainRatio    float64 `json:"drain_ratio"`
}

func (a *api) getControl(w http.ResponseWriter, _ *http.Request) {
	out := controlJSON{Models: []control.ModelStatus{}}
	if l := a.cfg.Control; l != nil {
		c := l.Config()
		out.Enabled, out.Models = true, l.Status()
		out.Config = &controlConfigJSON{Interval: c.Interval.String(), WaitingTarget: c.WaitingTarget,
			MinFactor: c.MinFactor, MaxFactor: c.MaxFactor, Decrease: c.Decrease, Increase: c.Increase,
			Hysteresis: c.Hysteresis, DrainRatio: c.DrainRatio}
	}
	writeJSON(w, out)
}
