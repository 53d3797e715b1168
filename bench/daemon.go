package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// daemonSpec is a server the harness runs as a child for a scenario
// (nginx, Redis): in a temporary directory of its own, on a 127.0.0.1
// port that was free a moment before.
type daemonSpec struct {
	name    string                                   // in the directory's name and in errors
	args    func(dir, addr string) ([]string, error) // its arguments; may write its files into dir
	logFile string                                   // its log in dir, quoted when it does not start
	ready   func(addr string) bool                   // one look at whether it serves
}

// startDaemon runs bin as d says and waits up to 10 s for it to serve.
// stop kills it and removes its directory.
func startDaemon(bin string, d daemonSpec) (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "pacegate-bench-"+d.name+"-")
	if err != nil {
		return "", nil, err
	}
	fail := func(err error) (string, func(), error) {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	if addr, err = freeAddr(); err != nil {
		return fail(err)
	}
	args, err := d.args(dir, addr)
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if d.ready(addr) {
			return addr, stop, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, d.logFile))
	stop()
	return "", nil, fmt.Errorf("%s did not start on %s: %s", d.name, addr, log)
}

// freeAddr returns a 127.0.0.1 address that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// dials reports whether addr accepts a TCP connection.
func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
