package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gatewayProc is the pacegate binary running as an OS process of its own
// (the scenarios that signal it, or read its CPU time and RSS), with its
// config in a file. It keeps its listen address across restarts.
type gatewayProc struct {
	t      testing.TB
	bin    string
	config string // the config file's path
	listen string // host:port, fixed

	mu      sync.Mutex // guards the fields below
	cmd     *exec.Cmd
	admin   string        // the admin listener's address
	done    chan struct{} // closed when the process has exited
	reloads int           // "config reloaded" log lines, over every run
	head    []string      // the first log lines of the current run
}

// buildGateway builds the pacegate command into dir, once per test.
func buildGateway(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "pacegate")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pacegate/pacegate").CombinedOutput()
	if err != nil {
		t.Fatalf("go build pacegate: %v\n%s", err, out)
	}
	return bin
}

// startProc builds the binary and starts it in front of h's simulators,
// with h's config on a free port; the test's cleanup stops it.
func (h *harness) startProc(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	_ = ln.Close() // a race with another process for the port is possible, and would fail the start loudly
	p := &gatewayProc{t: t, bin: buildGateway(t, dir), config: filepath.Join(dir, "pacegate.yaml"), listen: listen}
	p.writeConfig(h.gatewayYAML(listen))
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	h.proc = p
}

func (p *gatewayProc) url() string { return "http://" + p.listen }

func (p *gatewayProc) writeConfig(yaml string) {
	if err := os.WriteFile(p.config, []byte(yaml), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// start runs the binary and returns once it listens (its "pacegate
// listening" and "admin API listening" log lines).
func (p *gatewayProc) start() error {
	cmd := exec.Command(p.bin, "--config", p.config)
	cmd.Env = append(os.Environ(), "PACEGATE_ADMIN_TOKEN="+adminToken, "PACEGATE_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.admin, p.head = cmd, done, "", nil
	p.mu.Unlock()
	go p.readLog(stderr, ready, func() { _ = cmd.Wait(); close(done) })
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-done:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("the pacegate process did not start:\n%s", strings.Join(p.head, "\n"))
}

// readLog reads the process's JSON log to its end: it closes ready once
// both listeners are up and counts reloads; then it calls exited.
func (p *gatewayProc) readLog(r io.Reader, ready chan struct{}, exited func()) {
	defer exited()
	br := bufio.NewReader(r)
	listening := false
	for {
		line, err := br.ReadBytes('\n')
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if !bytes.Contains(line, []byte(`"msg":"request"`)) { // skip the access log cheaply: a flood writes a line per request
			_ = json.Unmarshal(line, &l)
		}
		p.mu.Lock()
		if len(p.head) < 40 {
			p.head = append(p.head, strings.TrimSpace(string(line)))
		}
		switch l.Msg {
		case "pacegate listening":
			listening = true
		case "admin API listening":
			p.admin = l.Addr
			if listening {
				close(ready)
			}
		case "config reloaded":
			p.reloads++
		}
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// signal sends sig to the running process.
func (p *gatewayProc) signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Errorf("signal %s: %v", sig, err)
	}
}

// terminate sends SIGTERM and waits for the process to exit (it drains
// first: shutdown_delay 0s, shutdown_grace 10s); it kills it after 20 s.
// It returns how long the exit took.
func (p *gatewayProc) terminate() time.Duration {
	start := time.Now()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.t.Errorf("the pacegate process did not exit within 20 s of SIGTERM; killed")
		_ = cmd.Process.Kill()
		<-done
	}
	return time.Since(start)
}

func (p *gatewayProc) stop() {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	default:
		p.terminate()
	}
}

func (p *gatewayProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

func (p *gatewayProc) reloadCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloads
}

// cpu is the process's user+system CPU time so far: fields 14 and 15 of
// /proc/<pid>/stat, in clock ticks of 1/100 s (USER_HZ on every Linux
// architecture Go supports).
func (p *gatewayProc) cpu() time.Duration {
	f, err := procStat(p.pid())
	if err != nil || len(f) < 13 {
		p.t.Fatalf("/proc stat: %v", err)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		p.t.Fatalf("/proc stat utime/stime: %q %q", f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / 100
}

// procStat is /proc/<pid>/stat from field 3 on (the command name, field
// 2, may hold spaces: count after its ')').
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, errors.New("malformed /proc stat")
	}
	return strings.Fields(string(b[i+1:])), nil
}

// rss is the process's resident set (VmRSS of /proc/<pid>/status), in
// bytes.
func (p *gatewayProc) rss() uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				p.t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	p.t.Fatal("no VmRSS in /proc status")
	return 0
}
