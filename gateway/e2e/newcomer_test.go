package e2e

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGoRunAsANewcomer does what the README's first command promises:
// build and start pacegate with no config, take the key it prints, and
// curl -N a streamed completion.
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
	key := readKey(t, stdout)
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

// readKey reads the demo banner until the "API key:" line.
func readKey(t *testing.T, stdout interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "API key: "); ok {
				found <- k
				break
			}
		}
		for sc.Scan() { // keep draining so the process never blocks on stdout
		}
	}()
	select {
	case k := <-found:
		return k
	case <-time.After(30 * time.Second):
		t.Fatal("pacegate printed no API key")
		return ""
	}
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
