package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheckTimeout bounds the whole check; Docker's HEALTHCHECK has its
// own timeout (30s by default), which must not be what ends it.
const healthcheckTimeout = 3 * time.Second

// Healthcheck GETs args[0], or without arguments /healthz on the address
// in PACEGATE_LISTEN (read through lookup; default 127.0.0.1:8080, and an
// unspecified host such as 0.0.0.0 is reached through loopback). It
// returns nil on 200 OK. It exists because the distroless image has no
// curl: the Dockerfile's HEALTHCHECK runs `pacegate healthcheck`.
func Healthcheck(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	var url string
	switch len(args) {
	case 0:
		url = healthzURL(lookup)
	case 1:
		url = args[0]
	default:
		return fmt.Errorf("healthcheck: want at most one URL, got %q", args)
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s %s", url, resp.Status, body)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", body)
	return err
}

// healthzURL builds the local /healthz URL from the listen address.
func healthzURL(lookup func(string) (string, bool)) string {
	addr := "127.0.0.1:8080"
	if v, ok := lookup("PACEGATE_LISTEN"); ok && v != "" {
		addr = v
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/healthz"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}
