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
	"os"
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
	a, err := New(cfg, Options{Logger: o.Logger})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	if o.ConfigPath == "" {
		printDemo(o.Stdout, a.URL(), cfg.Tenants[0].Keys[0])
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
		key = randomKey()
	}
	cfg, err := config.Parse([]byte(demoConfig(simURL, key)))
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

func demoConfig(simURL, key string) string {
	// No shutdown delay: no load balancer routes to a demo.
	return fmt.Sprintf(`listen: "127.0.0.1:8080"
server: {shutdown_delay: 0s}
upstreams:
  - url: %q
defaults: {rpm: 600, tpm: 1000000, burst: 60, rate: 5, backlog: 1000, max_wait: 60s}
tenants:
  - id: demo
    keys: [%q]
`, simURL, key)
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

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return "sk-demo-" + hex.EncodeToString(b)
}

func printDemo(w io.Writer, url, key string) {
	fmt.Fprintf(w, `
pacegate is running in demo mode on %[1]s (simulated model %[3]q).
API key: %[2]s

  curl -N %[1]s/v1/chat/completions \
    -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"%[3]s","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}'

`, url, key, DemoModel)
}
