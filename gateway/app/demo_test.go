package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runDemo runs Main with no config and the environment env, and returns
// the banner it prints once it is out. Main stops when the test ends.
func runDemo(t *testing.T, env map[string]string) string {
	t.Helper()
	out := new(syncBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, MainOptions{Stdout: out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Main returned %v", err)
		}
	})
	eventually(t, 10*time.Second, "the demo banner", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Main returned %v before printing its banner", err)
		default:
		}
		return strings.Contains(out.String(), "API key: ")
	})
	return out.String()
}

var matrixLine = regexp.MustCompile(`(?m)^Bucket matrix: (\S+)$`)

// matrixURL is the matrix link of a banner, split into the admin base
// URL and the token in its fragment.
func matrixURL(t *testing.T, banner string) (base, token string) {
	t.Helper()
	m := matrixLine.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no matrix link in the banner:\n%s", banner)
	}
	u, err := url.Parse(m[1])
	if err != nil || u.Scheme != "http" || u.Path != "/admin/ui" {
		t.Fatalf("matrix link %q: %v", m[1], err)
	}
	token, ok := strings.CutPrefix(u.EscapedFragment(), "token=")
	if !ok {
		t.Fatalf("matrix link %q has no #token=", m[1])
	}
	token, err = url.PathUnescape(token)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + u.Host, token
}

func adminGet(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The demo's banner links the matrix page on a loopback admin listener
// with a generated token: the page loads, the token opens the admin API,
// a wrong one is refused.
func TestDemoPrintsAReachableMatrixLink(t *testing.T) {
	banner := runDemo(t, map[string]string{"PACEGATE_LISTEN": "127.0.0.1:0", "PACEGATE_ADMIN_LISTEN": "127.0.0.1:0"})
	base, token := matrixURL(t, banner)
	if host, _, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://")); host != "127.0.0.1" {
		t.Errorf("admin listens on %s, want loopback", base)
	}
	if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(token) {
		t.Errorf("token %q, want 96 random bits in hex", token)
	}
	if !strings.Contains(banner, "Admin token: "+token+"\n") ||
		!strings.Contains(banner, "curl "+base+"/admin/buckets -H \"Authorization: Bearer "+token+"\"") {
		t.Errorf("the banner does not show the token and an admin call:\n%s", banner)
	}
	if status, page := adminGet(t, base+"/admin/ui", ""); status != 200 || !strings.Contains(page, `<form id="login-form">`) {
		t.Errorf("matrix page: %d\n%.200s", status, page)
	}
	if status, body := adminGet(t, base+"/admin/buckets", token); status != 200 || strings.TrimSpace(body) != `{"object":"list","data":[],"total":0,"offset":0,"limit":100}` {
		t.Errorf("admin API with the printed token: %d %s", status, body)
	}
	status, body := adminGet(t, base+"/admin/buckets", token+"x")
	if want := `{"error":{"message":"Missing or invalid admin token.","type":"invalid_request_error","param":null,"code":"invalid_admin_token"}}`; status != 401 || strings.TrimSpace(body) != want {
		t.Errorf("a wrong token: %d %s\nwant 401 %s", status, body, want)
	}
}

// An explicit PACEGATE_ADMIN_TOKEN wins over the generated one, escaped
// in the link so that the page decodes it whole; set empty, it switches
// the admin API off, and the banner says nothing of it.
func TestDemoAdminTokenFromTheEnvironment(t *testing.T) {
	env := map[string]string{"PACEGATE_LISTEN": "127.0.0.1:0", "PACEGATE_ADMIN_LISTEN": "127.0.0.1:0",
		"PACEGATE_ADMIN_TOKEN": "my token&co"}
	banner := runDemo(t, env)
	if !strings.Contains(banner, "/admin/ui#token=my%20token%26co\n") {
		t.Errorf("the link does not carry the escaped token:\n%s", banner)
	}
	base, token := matrixURL(t, banner)
	if token != "my token&co" {
		t.Errorf("token %q, want the environment's", token)
	}
	if status, body := adminGet(t, base+"/admin/buckets", token); status != 200 {
		t.Errorf("admin API with the environment's token: %d %s", status, body)
	}

	env["PACEGATE_ADMIN_TOKEN"] = ""
	if banner := runDemo(t, env); strings.Contains(banner, "admin") {
		t.Errorf("admin API off, yet the banner mentions it:\n%s", banner)
	}
}

// A demo whose admin address is taken (9090 is Prometheus's port too)
// still starts, with its admin API on another loopback port, and the
// banner links that one.
func TestDemoAdminFallsBackWhenItsPortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:9090")
	switch {
	case err == nil:
		defer ln.Close()
	case !errors.Is(err, syscall.EADDRINUSE):
		t.Fatal(err) // taken by another process is as good
	}
	base, token := matrixURL(t, runDemo(t, map[string]string{"PACEGATE_LISTEN": "127.0.0.1:0"}))
	if base == "http://127.0.0.1:9090" || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("admin base %s, want another loopback port", base)
	}
	if status, body := adminGet(t, base+"/admin/buckets", token); status != 200 {
		t.Errorf("admin API on the fallback port: %d %s", status, body)
	}
}
