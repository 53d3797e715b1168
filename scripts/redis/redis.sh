#!/usr/bin/env bash
# redis.sh: a local Redis for pacegate's shared cluster store and its test
# suite. It binds 127.0.0.1 only; config, data, pid file and log live under
# $REDIS_HOME (default $REPO/.cache/redis).
#
#   bash scripts/redis/redis.sh fetch start   # fresh machine / CI
#   eval "$(bash scripts/redis/redis.sh env | sed 's/^/export /')"
#   bash scripts/redis/redis.sh restart | status | stop
#
# Subcommands run in the order given; each is idempotent.
#   fetch    install Debian's redis-server with apt-get when it is missing
#            (apt-get update first; sudo when not root)
#   start    run redis-server on 127.0.0.1:$REDIS_PORT, waited for by PING
#   stop     SHUTDOWN NOSAVE, then TERM and KILL only after a timeout
#   restart  stop then start (the tests use it to lose the store mid-run)
#   status   what runs, on which pid and port
#   env      print PACEGATE_CLUSTER_STORE for the Go tests
#
# Environment (defaults in brackets): REDIS_HOME [$REPO/.cache/redis],
# REDIS_PORT [6391: not 6379, so that a developer's own Redis is left alone],
# REDIS_TIMEOUT [30 s per wait].
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REDIS_HOME=${REDIS_HOME:-$REPO/.cache/redis}
REDIS_PORT=${REDIS_PORT:-6391}
REDIS_TIMEOUT=${REDIS_TIMEOUT:-30}
PIDFILE=$REDIS_HOME/redis.pid

log() { echo "redis.sh: $*" >&2; }
die() { log "$*"; exit 1; }

cli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

running() { [[ -s $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

fetch() {
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    log "redis-server present: $(redis-server --version | head -1)"
    return
  fi
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  log "installing redis-server with apt-get"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # Debian's package may start a system service on 6379; pacegate's tests use
  # their own instance below and leave that one alone.
  command -v redis-server >/dev/null || die "redis-server still missing after apt-get"
}

start() {
  command -v redis-server >/dev/null || die "redis-server missing: run fetch first"
  mkdir -p "$REDIS_HOME/data"
  if running; then
    log "already running, pid $(cat "$PIDFILE")"
    return
  fi
  cat >"$REDIS_HOME/redis.conf" <<CONF
bind 127.0.0.1
protected-mode yes
port $REDIS_PORT
daemonize yes
pidfile $PIDFILE
logfile $REDIS_HOME/redis.log
dir $REDIS_HOME/data
save ""
appendonly no
CONF
  redis-server "$REDIS_HOME/redis.conf"
  local deadline=$((SECONDS + REDIS_TIMEOUT))
  until [[ $(cli ping 2>/dev/null) == PONG ]]; do
    ((SECONDS < deadline)) || die "no PONG on 127.0.0.1:$REDIS_PORT after ${REDIS_TIMEOUT}s (see $REDIS_HOME/redis.log)"
    sleep 0.1
  done
  log "listening on 127.0.0.1:$REDIS_PORT, pid $(cat "$PIDFILE")"
}

stop() {
  running || { log "not running"; rm -f "$PIDFILE"; return 0; }
  local pid
  pid=$(cat "$PIDFILE")
  cli shutdown nosave >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + REDIS_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "pid $pid ignored SHUTDOWN; killing"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$PIDFILE"
  log "stopped"
}

status() {
  if running; then
    echo "redis pid $(cat "$PIDFILE") port $REDIS_PORT"
  else
    echo "redis not running"
  fi
}

env_vars() { echo "PACEGATE_CLUSTER_STORE=redis://127.0.0.1:$REDIS_PORT/0"; }

[[ $# -gt 0 ]] || die "usage: redis.sh fetch|start|stop|restart|status|env ..."
for cmd in "$@"; do
  case $cmd in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  env) env_vars ;;
  *) die "unknown subcommand $cmd" ;;
  esac
done
