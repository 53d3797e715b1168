package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	addr, stop, err := startDaemon(bin, daemonSpec{name: "nginx", logFile: "error.log", ready: dials,
		args: func(dir, addr string) ([]string, error) {
			conf := filepath.Join(dir, "nginx.conf")
			err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, upstream, addr, rps, burst), 0o644)
			return []string{"-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")}, err
		}})
	if err != nil {
		return "", nil, err
	}
	return "http://" + addr, stop, nil
}
