package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

const reloadBefore = `
defaults: {rate: 0.1, backlog: 100, max_wait: 60s}
tenants:
  - {id: acme, keys: [sk-acme, sk-old]}
`

// After: a new tenant, a key removed, acme's rate raised.
const reloadAfter = `
defaults: {rate: 0.1, backlog: 100, max_wait: 60s}
tenants:
  - {id: acme, keys: [sk-acme], limits: {rate: 50}}
  - {id: newco, keys: [sk-new]}
`

// TestReloadKeepsQueuedRequests: tenants, keys and quotas change under
// queued requests; none is dropped, and they leave at the new pace.
func TestReloadKeepsQueuedRequests(t *testing.T) {
	ta := startApp(t, fastSim(), reloadBefore)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, hangGuard, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	results := ta.fire(4, "sk-acme") // at 0.1/s: one leaves at once, 3 wait 10 s each
	eventually(t, hangGuard, "3 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 3 })
	changed := time.Now()
	if err := ta.a.Reload(parse(t, configText("http://unused", reloadAfter))); err != nil {
		t.Fatal(err)
	}
	receiveOK(t, results, 4) // none was dropped
	at := ta.arrivals()
	if len(at) != 4 {
		t.Fatalf("%d requests reached the model, want 4", len(at))
	}
	checkSpedUp(t, at, 1, changed, slowInterval, fastInterval) // the reloaded 50/s
	if code, body := ta.chat(context.Background(), "sk-new"); code != 200 {
		t.Fatalf("the new tenant's key: %d %s", code, body)
	}
	if code, _ := ta.chat(context.Background(), "sk-old"); code != 401 {
		t.Fatalf("the removed key: %d, want 401", code)
	}
	if got := ta.a.Pacer.EffectiveRate(k); got != 50 {
		t.Fatalf("EffectiveRate = %v, want the reloaded 50", got)
	}
}

// TestReloadInvalidFileKeepsConfig: a broken file is refused with its
// exact error in the log, and the running config stays.
func TestReloadInvalidFileKeepsConfig(t *testing.T) {
	ta := startApp(t, fastSim(), reloadBefore)
	path := filepath.Join(t.TempDir(), "pacegate.yaml")
	broken := configText("http://127.0.0.1:1", "tenants:\n  - {id: acme, keys: [sk-acme], limits: {rate: -1}}\n")
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(syncBuffer)
	reload(ta.a, MainOptions{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(logs, nil)), Lookup: noEnv})
	want := `level=ERROR msg="config reload failed; keeping the previous config" path=` + path +
		` err="` + path + `: tenants[0].limits.rate: must be > 0"`
	if got := strings.TrimSpace(logs.String()); !strings.HasSuffix(got, want) {
		t.Fatalf("log:\n%s\nwant it to end with:\n%s", got, want)
	}
	if code, body := ta.chat(context.Background(), "sk-old"); code != 200 {
		t.Fatalf("the old config's key after a refused reload: %d %s", code, body)
	}
}

func noEnv(string) (string, bool) { return "", false }
