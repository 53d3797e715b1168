package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGoRunAsANewcomer does what the README's first command promises:
// build and start pacegate with no config, take the key it prints, curl
// -N a streamed completion, and open the matrix link it prints.
func TestGoRunAsANewcomer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PACEGATE_LISTEN="+addr, "PACEGATE_CONFIG=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	key, matrix := readBanner(t, stdout)
	out, err := exec.Command(curl, "-N", "-sS", "--max-time", "20", "http://"+addr+"/v1/chat/completions",
		"-H", "Authorization: Bearer "+key, "-H", "Content-Type: application/json",
		"-d", `{"model":"sim-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{`"content":"tok0 "`, `"content":"tok1 "`, `"content":"tok2"`} {
		if !strings.Contains(text, want) {
			t.Errorf("stream lacks %s:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]:\n%s", text)
	}
	checkMatrixLink(t, matrix)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("pacegate exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("pacegate did not exit within 15s of SIGTERM")
	}
}

// readBanner reads the demo banner until its matrix link, and returns
// the API key and that link.
func readBanner(t *testing.T, stdout io.Reader) (key, matrix string) {
	t.Helper()
	type banner struct{ key, matrix string }
	found := make(chan banner, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var b banner
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "API key: "); ok {
				b.key = k
			}
			if m, ok := strings.CutPrefix(sc.Text(), "Bucket matrix: "); ok {
				b.matrix = m
				found <- b
				break
			}
		}
		for sc.Scan() { // keep draining so the process never blocks on stdout
		}
	}()
	select {
	case b := <-found:
		return b.key, b.matrix
	case <-time.After(30 * time.Second):
		t.Fatal("pacegate printed no API key and matrix link")
		return "", ""
	}
}

// checkMatrixLink opens the demo's matrix link as a browser would (the
// fragment stays in the browser) and calls the admin API with the token
// it carries; a wrong token is refused.
func checkMatrixLink(t *testing.T, link string) {
	t.Helper()
	page, token, ok := strings.Cut(link, "#token=")
	if !ok || !strings.HasPrefix(page, "http://127.0.0.1:") || !strings.HasSuffix(page, "/admin/ui") {
		t.Fatalf("matrix link %q, want http://127.0.0.1:<port>/admin/ui#token=...", link)
	}
	if status := httpGet(t, page, ""); status != http.StatusOK {
		t.Errorf("matrix page: %d", status)
	}
	api := strings.TrimSuffix(page, "/ui") + "/matrix"
	if status := httpGet(t, api, token); status != http.StatusOK {
		t.Errorf("admin API with the link's token: %d", status)
	}
	if status := httpGet(t, api, token+"x"); status != http.StatusUnauthorized {
		t.Errorf("admin API with a wrong token: %d, want 401", status)
	}
}

func httpGet(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
