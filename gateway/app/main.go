package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy/config"
)

// MainOptions are what the command line gives Main.
type MainOptions struct {
	ConfigPath string // empty: demo mode
	DemoKey    string // demo mode's API key; empty: a random one
	Stdout     io.Writer
	Logger     *slog.Logger
	Lookup     func(string) (string, bool) // environment
	Reload     <-chan os.Signal            // SIGHUP
}

// Main runs pacegate until ctx is cancelled (SIGINT/SIGTERM), then shuts
// down gracefully.
func Main(ctx context.Context, o MainOptions) error {
	// Watch before the first read: an edit that lands between the read
	// and the watch would otherwise be taken as the watcher's baseline
	// and never reloaded. An edit before the read costs one redundant
	// reload, which is harmless.
	fileChanged, stopWatch := watchFile(o)
	defer stopWatch()
	cfg, stopDemo, err := loadConfig(ctx, o)
	if err != nil {
		return err
	}
	defer stopDemo()
	a, err := New(cfg, Options{Logger: o.Logger, AdminFallback: adminFallback(o)})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	if o.ConfigPath == "" {
		printDemo(o.Stdout, a.URL(), cfg.Tenants[0].Keys[0], a.AdminURL(), cfg.Admin.Token)
	}
	for {
		select {
		case <-fileChanged:
			o.Logger.Info("config file changed; reloading", "path", o.ConfigPath)
			reload(a, o)
		case <-ctx.Done():
			s := a.config().Server
			o.Logger.Info("shutting down", "delay", *s.ShutdownDelay, "grace", s.ShutdownGrace)
			return a.Shutdown(context.Background(), *s.ShutdownDelay, s.ShutdownGrace)
		case <-o.Reload:
			if o.ConfigPath == "" {
				continue
			}
			reload(a, o)
		}
	}
}

// reload re-reads the config file; an invalid file keeps the old config.
func reload(a *App, o MainOptions) {
	cfg, err := readConfig(o.ConfigPath, o.Lookup)
	if err == nil {
		err = a.Reload(cfg)
	}
	if err != nil {
		o.Logger.Error("config reload failed; keeping the previous config", "path", o.ConfigPath, "err", err)
	}
}

func readConfig(path string, lookup func(string) (string, bool)) (*config.File, error) {
	return config.LoadEnv(path, lookup)
}

// loadConfig reads the config file, or builds the demo config around an
// in-process simulated model when there is none.
func loadConfig(ctx context.Context, o MainOptions) (*config.File, func(), error) {
	if o.ConfigPath != "" {
		cfg, err := readConfig(o.ConfigPath, o.Lookup)
		return cfg, func() {}, err
	}
	simURL, stop, err := startDemoSim(ctx)
	if err != nil {
		return nil, nil, err
	}
	key := o.DemoKey
	if key == "" {
		key = "sk-demo-" + randomHex()
	}
	// The admin API is on, with a token of its own; PACEGATE_ADMIN_TOKEN,
	// applied below, wins (set empty, it switches the admin API off).
	cfg, err := config.Parse([]byte(demoConfig(simURL, key, randomHex())))
	if err == nil {
		err = cfg.ApplyEnv(o.Lookup)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	o.Logger.Warn("no --config given: running in demo mode against a SIMULATED model (not a real LLM)", "upstream", simURL, "model", DemoModel)
	return cfg, stop, nil
}

// DemoModel is the model the demo mode's simulated upstream serves.
const DemoModel = "sim-model"

func demoConfig(simURL, key, adminToken string) string {
	// No shutdown delay: no load balancer routes to a demo.
	return fmt.Sprintf(`listen: "127.0.0.1:8080"
admin: {listen: "127.0.0.1:9090", token: %q}
server: {shutdown_delay: 0s}
upstreams:
  - url: %q
defaults: {rpm: 600, tpm: 1000000, burst: 60, rate: 5, backlog: 1000, max_wait: 60s}
tenants:
  - id: demo
    keys: [%q]
`, adminToken, simURL, key)
}

// adminFallback is where a demo's admin API listens when its usual
// address is taken (9090 is also Prometheus's port): any free loopback
// port, which the banner prints. An address chosen explicitly
// (PACEGATE_ADMIN_LISTEN, or a config file) has none: it is used or the
// start fails.
func adminFallback(o MainOptions) string {
	if o.ConfigPath != "" {
		return ""
	}
	if _, set := o.Lookup(config.EnvAdminListen); set {
		return ""
	}
	return "127.0.0.1:0"
}

// startDemoSim serves the simulated vLLM on an ephemeral loopback port.
func startDemoSim(ctx context.Context) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: vllmsim.New(vllmsim.Config{Models: []string{DemoModel}, TTFT: 200 * time.Millisecond, ITL: 20 * time.Millisecond}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("demo simulator stopped", "err", err)
		}
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// randomHex is 96 random bits in hex: a demo's API key and admin token.
func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// printDemo prints the demo's banner: where it runs, its API key, a
// request to try, and, when the admin API is on (adminBase is its base
// URL, not empty), the bucket matrix page's address with the admin token
// in its fragment (which the browser never sends; the page keeps it in
// the tab) and an admin API call to try.
func printDemo(w io.Writer, url, key, adminBase, adminToken string) {
	var b strings.Builder // one write: a reader never sees half a banner
	fmt.Fprintf(&b, `
pacegate is running in demo mode on %[1]s (simulated model %[3]q).
API key: %[2]s

  curl -N %[1]s/v1/chat/completions \
    -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"%[3]s","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}'

`, url, key, DemoModel)
	if adminBase != "" {
		fmt.Fprintf(&b, `Bucket matrix: %[1]s/admin/ui#token=%[2]s
Admin token: %[3]s

  curl %[1]s/admin/buckets -H "Authorization: Bearer %[3]s"

`, adminBase, fragmentEscape(adminToken), adminToken)
	}
	_, _ = io.WriteString(w, b.String())
}

// fragmentEscape escapes s so that the page's decodeURIComponent gets s
// back whatever it holds: percent-escapes only, since QueryEscape's + for
// a space is not one it decodes.
func fragmentEscape(s string) string {
	return strings.ReplaceAll(neturl.QueryEscape(s), "+", "%20")
}
