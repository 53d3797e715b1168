package app

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// loadingUpstream fronts a simulated vLLM that is still loading its
// model until loaded is set: /health and generation answer 503 and
// /v1/models lists nothing.
type loadingUpstream struct {
	sim    *vllmsim.Server
	loaded atomic.Bool
}

func (u *loadingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case u.loaded.Load():
		u.sim.ServeHTTP(w, r)
	case r.URL.Path == "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

const readyConfig = `
tenants:
  - {id: acme, keys: [sk-acme]}
`

// TestReadyzAgreesWithModels: pacegate started before vLLM has loaded its
// model is not ready, lists no model and answers 404 for it. The first
// 200 from /readyz comes with the model listed and served, never a probe
// interval before the model is.
func TestReadyzAgreesWithModels(t *testing.T) {
	sim := vllmsim.New(fastSim())
	up := &loadingUpstream{sim: sim}
	ta := startAppBehind(t, sim, up, readyConfig)
	const noModels = `{"object":"list","data":[]}` + "\n"
	if code, body := ta.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "upstreams: none healthy with known models") {
		t.Fatalf("/readyz while loading: %d %s", code, body)
	}
	if code, body := ta.get("/v1/models"); code != http.StatusOK || body != noModels {
		t.Fatalf("/v1/models while loading: %d %s", code, body)
	}
	if code, body := ta.chat(t.Context(), "sk-acme"); code != http.StatusNotFound || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Fatalf("chat while loading: %d %s", code, body)
	}
	up.loaded.Store(true)
	eventually(t, 10*time.Second, "/readyz to answer 200", func() bool {
		code, _ := ta.get("/readyz")
		return code == http.StatusOK
	})
	if code, body := ta.get("/v1/models"); code != http.StatusOK || !strings.Contains(body, `"id":"`+simModel+`"`) {
		t.Fatalf("/v1/models once ready: %d %s", code, body)
	}
	if code, body := ta.chat(t.Context(), "sk-acme"); code != http.StatusOK {
		t.Fatalf("chat once ready: %d %s", code, body)
	}
}
