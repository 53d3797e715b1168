package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// redisBinary returns the redis-server executable, or "" when none is
// installed (apt-get install redis-server, or scripts/redis/redis.sh
// fetch).
func redisBinary() string {
	if p := os.Getenv("PACEGATE_BENCH_REDIS"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return ""
}

// startRedis runs a throwaway redis-server of its own on 127.0.0.1, in
// the foreground, with nothing saved to disk: the replicas scenario's
// store when PACEGATE_CLUSTER_STORE names none. stop kills it and
// removes its directory.
func startRedis(bin string) (url string, stop func(), err error) {
	addr, stop, err := startDaemon(bin, daemonSpec{name: "redis", logFile: "redis.log", ready: redisPong,
		args: func(dir, addr string) ([]string, error) {
			_, port, err := net.SplitHostPort(addr)
			return []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
				"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, err
		}})
	if err != nil {
		return "", nil, err
	}
	return "redis://" + addr + "/0", stop, nil
}

// redisPong sends one PING in Redis's inline protocol.
func redisPong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

// redisVersion is bin's version line, as `redis-server --version` gives
// it, or "version unknown".
func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(string(out))
}
