// Command pacegate is an OpenAI-compatible LLM gateway that paces each
// tenant+model through its own queue instead of answering 429.
//
// Usage:
//
//	pacegate [--config pacegate.yaml]   run the gateway (no config: demo mode)
//	pacegate sim [flags]                run the simulated vLLM upstream
//	pacegate healthcheck [url]          GET /healthz (default: on PACEGATE_LISTEN); exit 0 when 200
//	pacegate version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/gateway/app"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "pacegate:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "sim":
			return vllmsim.RunCommand(ctx, args[1:], stdout)
		case "healthcheck":
			return app.Healthcheck(ctx, args[1:], os.LookupEnv, stdout)
		case "version":
			_, err := fmt.Fprintln(stdout, "pacegate", version)
			return err
		}
	}
	fs := flag.NewFlagSet("pacegate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", os.Getenv("PACEGATE_CONFIG"), "path of the YAML config (env PACEGATE_CONFIG); none: demo mode with a simulated model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logs, flushLogs := app.BufferLogs(stderr)
	defer flushLogs()
	logger := app.NewLogger(logs, os.Getenv("PACEGATE_LOG_LEVEL"))
	slog.SetDefault(logger)
	return app.Main(ctx, app.MainOptions{
		ConfigPath: *configPath,
		DemoKey:    os.Getenv("PACEGATE_DEMO_KEY"),
		Stdout:     stdout,
		Logger:     logger,
		Lookup:     os.LookupEnv,
		Reload:     reloadSignals(),
	})
}

// reloadSignals delivers SIGHUP as a config reload request.
func reloadSignals() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}
