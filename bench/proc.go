package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bareProxyFlag re-executes the bench binary as the bare proxy in a
// process of its own (see serveBareProxyChild); the overhead scenario
// uses it so that the proxy's CPU time can be read from /proc like
// pacegate's.
const bareProxyFlag = "-serve-bareproxy"

// child is a process the harness started: pacegate or the bare proxy.
type child struct {
	name string
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process has exited
}

// buildPacegate builds the pacegate command into dir with `go build -o`,
// from the module the harness runs in.
func buildPacegate(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "pacegate")
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pacegate/pacegate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build pacegate: %w\n%s", err, out)
	}
	return bin, nil
}

// startPacegateProc runs the pacegate binary with c as its config file,
// its admin API off unless env (KEY=value pairs, added to the harness's
// environment) turns it on, and waits until it serves a chat completion.
func startPacegateProc(ctx context.Context, bin, dir string, c gwConfig, env ...string) (*child, error) {
	path := filepath.Join(dir, "pacegate.yaml")
	if err := os.WriteFile(path, []byte(c.yaml()), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Env = append(append(os.Environ(), "PACEGATE_ADMIN_TOKEN=", "PACEGATE_LOG_LEVEL=info"), env...) // the last of a key wins
	ch, err := startChild(ctx, "pacegate", cmd, pacegateAddr)
	if err != nil {
		return nil, err
	}
	if !waitChat(ctx, ch.url) {
		ch.stop()
		return nil, fmt.Errorf("pacegate process at %s did not become ready", ch.url)
	}
	return ch, nil
}

// startBareProxyProc re-executes this binary as the bare proxy in front
// of upstream.
func startBareProxyProc(ctx context.Context, upstream string, conns int) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, bareProxyFlag, upstream, strconv.Itoa(conns))
	ch, err := startChild(ctx, "bare proxy", cmd, bareAddr)
	if err != nil {
		return nil, err
	}
	if !waitChat(ctx, ch.url) {
		ch.stop()
		return nil, fmt.Errorf("bare proxy process at %s did not become ready", ch.url)
	}
	return ch, nil
}

// startChild starts cmd and reads its stderr until addr finds the
// listening address in a line; the rest of stderr is drained (pacegate
// writes its access log there, as in production, and pays for it).
func startChild(ctx context.Context, name string, cmd *exec.Cmd, addr func(line []byte) string) (*child, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{name: name, cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stderr)
		var head []string // the first lines, for an error message
		for {
			line, err := br.ReadBytes('\n')
			if a := addr(line); a != "" {
				found <- a
				break
			}
			if len(head) < 20 {
				head = append(head, strings.TrimSpace(string(line)))
			}
			if err != nil {
				found <- "!" + strings.Join(head, "\n")
				break
			}
		}
		_, _ = io.Copy(io.Discard, br)
		_ = cmd.Wait()
		close(ch.done)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case a := <-found:
		if strings.HasPrefix(a, "!") {
			ch.stop()
			return nil, fmt.Errorf("%s exited before listening:\n%s", name, a[1:])
		}
		ch.url = "http://" + a
		return ch, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	ch.stop()
	return nil, fmt.Errorf("%s did not report its address in time", name)
}

// pacegateAddr finds the address in pacegate's JSON "pacegate listening"
// log line.
func pacegateAddr(line []byte) string {
	var l struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &l) != nil || l.Msg != "pacegate listening" {
		return ""
	}
	return l.Addr
}

// bareAddr finds the address in the bare proxy's "listening <addr>" line.
func bareAddr(line []byte) string {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "listening ")
	if !ok {
		return ""
	}
	return s
}

// waitChat waits until url serves a one-token chat completion.
func waitChat(ctx context.Context, url string) bool {
	c := newClient(1)
	return waitFor(ctx, 10*time.Second, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return doStream(rctx, c, chatURL(url), "sk-t0", "", chatBody(simModel, 1, false)).Status == http.StatusOK
	})
}

// stop asks the process to end (SIGINT: pacegate drains) and kills it if
// it has not within 5 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// cpu is the process's user+system CPU time so far.
func (c *child) cpu() (time.Duration, error) { return procCPU(c.cmd.Process.Pid) }

func (c *child) switches() (int64, error) { return procSwitches(c.cmd.Process.Pid) }

// procSwitches sums the context switches, voluntary and not, of every
// thread of the process (/proc/<pid>/task/*/status). A Go process keeps
// the threads it started, so the sum over the live ones misses next to
// nothing.
func procSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("bench: no threads of %d in /proc: %v", pid, err)
	}
	var n int64
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited meanwhile
		}
		n += statusSwitches(b)
	}
	return n, nil
}

// statusSwitches is voluntary_ctxt_switches + nonvoluntary_ctxt_switches
// of one /proc status file.
func statusSwitches(status []byte) int64 {
	var n int64
	for line := range strings.Lines(string(status)) {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches") {
			x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += x
		}
	}
	return n
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and
// stime: 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU reads utime+stime (fields 14 and 15) of /proc/<pid>/stat: the
// CPU time of all the process's threads, in clock ticks.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; count after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bench: malformed utime/stime in /proc stat")
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// serveBareProxyChild is the body of the re-executed bare proxy: args are
// the upstream URL and the connection count. It prints "listening <addr>"
// to stderr and serves until SIGINT or SIGTERM.
func serveBareProxyChild(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: bench %s <upstream-url> <conns>", bareProxyFlag)
	}
	conns, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "listening", ln.Addr().String())
	srv := &http.Server{Handler: bareProxy(args[0], conns), ReadHeaderTimeout: 10 * time.Second}
	go stopOnSignal(srv)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// stopOnSignal closes srv on SIGINT or SIGTERM.
func stopOnSignal(srv *http.Server) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	_ = srv.Close()
}
