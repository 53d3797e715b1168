package vllmsim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"
)

// modelsFlag collects --model, repeated or comma-separated.
type modelsFlag []string

func (m *modelsFlag) String() string { return strings.Join(*m, ",") }

func (m *modelsFlag) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*m = append(*m, name)
		}
	}
	return nil
}

// faultsFlag collects --fault rules ([ParseFaultRule]), in order.
type faultsFlag []FaultRule

func (f *faultsFlag) String() string { return fmt.Sprint(len(*f), " rules") }

func (f *faultsFlag) Set(v string) error {
	r, err := ParseFaultRule(v)
	if err != nil {
		return err
	}
	*f = append(*f, r)
	return nil
}

// RunCommand is `pacegate sim`: it parses args (without the command
// name), serves a simulator until ctx is done, and prints
// "listening on http://<addr>" to stdout once it accepts connections.
func RunCommand(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, listen, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	sim := New(cfg)
	defer sim.Close()
	srv := &http.Server{
		Handler:           sim,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		// In-flight requests see ctx end too, so they abort at once and
		// Shutdown does not wait for long streams.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func parseFlags(args []string, out io.Writer) (Config, string, error) {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", "127.0.0.1:8000", "address to listen on")
	var models modelsFlag
	fs.Var(&models, "model", "served model name (repeat or comma-separate; default sim-model)")
	ttft := fs.Duration("ttft", 200*time.Millisecond, "time to first token")
	itl := fs.Duration("itl", 20*time.Millisecond, "inter-token latency")
	prefill := fs.Duration("prefill-per-token", 0, "prefill time per prompt token not in the prefix cache, added to TTFT")
	seqs := fs.Int("max-num-seqs", 256, "requests running at once; more wait")
	loadFactor := fs.Float64("time-factor-under-load", 1, "TTFT and ITL factor of a full batch, scaled linearly from 1 at one running request (>= 1; 1: off)")
	maxTok := fs.Int("max-tokens", 16, "completion length when the request sets none")
	cacheTokens := fs.Int("prefix-cache-tokens", 0, "prefix cache size in tokens, in blocks of 16 (0: off)")
	embDim := fs.Int("embedding-dim", 16, "length of an embedding vector")
	stored := fs.Int("max-stored-responses", 1024, "Responses API responses kept for GET and previous_response_id (negative: none)")
	var faults faultsFlag
	fs.Var(&faults, "fault", "a fault rule, e.g. status=503,count=5 or stall-after=3,match=FAULT (repeatable)")
	if err := fs.Parse(args); err != nil {
		return Config{}, "", err
	}
	if fs.NArg() > 0 {
		return Config{}, "", fmt.Errorf("sim: unexpected argument %q", fs.Arg(0))
	}
	if !(*loadFactor >= 1) || math.IsInf(*loadFactor, 0) {
		return Config{}, "", fmt.Errorf("sim: --time-factor-under-load must be a number >= 1, got %v", *loadFactor)
	}
	cfg := Config{Models: models, TTFT: noZero(*ttft), ITL: noZero(*itl), PrefillPerToken: *prefill, MaxNumSeqs: *seqs, TimeFactorUnderLoad: *loadFactor,
		PrefixCacheTokens: *cacheTokens, DefaultMaxTokens: *maxTok, EmbeddingDim: *embDim, MaxStoredResponses: *stored, Faults: faults}
	return cfg, *listen, nil
}

// noZero maps a requested 0 to the Config spelling of "none" (negative).
func noZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
