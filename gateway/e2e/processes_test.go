package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Two gateway processes (the real binary, twice) on one broker and one
// consumer group: every client gets its own complete response, none is
// consumed by the wrong replica.
func TestRocketMQTwoGatewayProcesses(t *testing.T) {
	queueA, queueB := rocketmqQueue(t, "pa"), rocketmqQueue(t, "pb")
	sim := newSim(t, fastSim())
	bin := buildBinary(t)
	urls := []string{startProcess(t, bin, queueA, sim.url), startProcess(t, bin, queueB, sim.url)}
	checkOwnResponses(t, sim, 6, urls...)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pacegate")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pacegate/pacegate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs the binary with a config in front of upstream and
// waits until /readyz answers 200.
func startProcess(t *testing.T, bin, queue, upstream string) string {
	t.Helper()
	addr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "pacegate.yaml")
	cfg := fmt.Sprintf("listen: %q\nupstreams:\n  - url: %q\n%s%s", addr, upstream, queue, tenantsYAML)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // drain the logs so the process never blocks on them
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	base := "http://" + addr
	eventually(t, 60*time.Second, "the gateway process to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}
