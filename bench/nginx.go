package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// nginxConf is the limit_req front end: one zone keyed by the API key,
// requests over the rate delayed (queued up to burst), then 429.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fcgi; uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  limit_req_zone $http_authorization zone=tenants:16m rate=%[4]dr/s;
  limit_req_status 429;
  upstream sim { server %[2]s; keepalive 128; }
  server {
    listen %[3]s;
    location / {
      limit_req zone=tenants burst=%[5]d;
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
`

// nginxBinary returns the nginx executable, or "" when none is
// installed (apt-get install nginx-light).
func nginxBinary() string {
	for _, p := range []string{os.Getenv("PACEGATE_BENCH_NGINX"), "/usr/sbin/nginx"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	return ""
}

// startNginx runs nginx in front of upstream (host:port) with limit_req
// at rps per API key and a delay queue of burst. stop kills the process
// it started.
func startNginx(bin, upstream string, rps, burst int) (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "pacegate-bench-nginx-")
	if err != nil {
		return "", nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, upstream, addr, rps, burst), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	for range 100 {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return "http://" + addr, stop, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	stop()
	return "", nil, fmt.Errorf("nginx did not start: %s", log)
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
