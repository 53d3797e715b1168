#!/usr/bin/env bash
# rmq.sh: a local Apache RocketMQ (namesrv + broker + cluster-mode proxy) for
# pacegate's RocketMQ backend and its test suite. Everything binds 127.0.0.1
# where RocketMQ allows it; jars, configs, store, pid files and logs live under
# $RMQ_HOME (default $REPO/.cache/rocketmq).
#
#   bash scripts/rocketmq/rmq.sh fetch start init   # fresh machine / CI
#   bash scripts/rocketmq/rmq.sh status | env | restart-proxy | stop
#
# Subcommands run in the order given; each is idempotent.
#   fetch          download the jars with Maven (skipped when the cache is complete)
#   start          namesrv -> broker -> proxy, each waited for by log line and port
#   init           create the LITE parent topic and the consumer group, then verify
#   stop           stop proxy, broker, namesrv (TERM, KILL only after a timeout)
#   restart-proxy  stop and start the proxy only (broker and store keep running)
#   restart-broker stop and start the broker only (namesrv, proxy and store stay;
#                  Lite subscriptions, which live in broker memory, are lost)
#   start-b        a second broker group, broker-b (port RMQ_BROKER_B_PORT [10921],
#                  store .../store-b), in the same cluster behind the same name
#                  server; run init after it so the topic and group exist on both
#   stop-b         stop broker-b
#   status         what runs, on which pid and port
#   env            print the PACEGATE_ROCKETMQ_* variables for the Go tests (with the
#                  store of each running broker group)
#   clean          stop, then delete the store, logs and configs (keeps the jars)
#
# Environment (defaults in brackets): RMQ_HOME [$REPO/.cache/rocketmq],
# RMQ_VERSION [5.5.1] (see pom.xml: 5.5.1 is only partly on Maven Central),
# RMQ_NAMESRV_PORT [9876], RMQ_BROKER_PORT [10911; also uses port-2 and port+1],
# RMQ_PROXY_PORT [8081, gRPC], RMQ_PROXY_REMOTING_PORT [18080: not 8080, which is pacegate's own default], RMQ_TOPIC [LLM_REQ],
# RMQ_GROUP [GID_PACEGATE], RMQ_TIMEOUT [120 s per wait], RMQ_LITE_EXPIRATION [1440 min],
# RMQ_NAMESRV_HEAP [256m], RMQ_BROKER_HEAP [1g], RMQ_PROXY_HEAP [768m],
# RMQ_LITE_CLIENT_QUOTA [20000: LiteTopics one client may subscribe; the broker's
# default 2000 is below what one gateway replica uses at scale],
# RMQ_LITE_EVENT_CAP [20000: pending "LiteTopic has messages" events per client;
# the default 100 makes dispatch wait 10-25 s once more LiteTopics are active],
# RMQ_POLL_CAP_MS [5000: the proxy's long-poll cap; bounds a missed wake-up].
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$REPO/scripts/rocketmq"
RMQ_HOME=${RMQ_HOME:-$REPO/.cache/rocketmq}
RMQ_VERSION=${RMQ_VERSION:-5.5.1}
RMQ_NAMESRV_PORT=${RMQ_NAMESRV_PORT:-9876}
RMQ_BROKER_PORT=${RMQ_BROKER_PORT:-10911}
RMQ_PROXY_PORT=${RMQ_PROXY_PORT:-8081}
RMQ_PROXY_REMOTING_PORT=${RMQ_PROXY_REMOTING_PORT:-18080}
RMQ_TOPIC=${RMQ_TOPIC:-LLM_REQ}
RMQ_GROUP=${RMQ_GROUP:-GID_PACEGATE}
RMQ_CLUSTER=${RMQ_CLUSTER:-DefaultCluster}
RMQ_BROKER_NAME=${RMQ_BROKER_NAME:-broker-a}
RMQ_BROKER_B_PORT=${RMQ_BROKER_B_PORT:-10921}
RMQ_TIMEOUT=${RMQ_TIMEOUT:-120}
RMQ_LITE_EXPIRATION=${RMQ_LITE_EXPIRATION:-1440} # minutes a LiteTopic may stay idle before the TTL reclaims it
RMQ_NAMESRV_HEAP=${RMQ_NAMESRV_HEAP:-256m}
RMQ_BROKER_HEAP=${RMQ_BROKER_HEAP:-1g}
RMQ_PROXY_HEAP=${RMQ_PROXY_HEAP:-768m}
RMQ_LITE_CLIENT_QUOTA=${RMQ_LITE_CLIENT_QUOTA:-20000}
RMQ_LITE_EVENT_CAP=${RMQ_LITE_EVENT_CAP:-20000}
RMQ_POLL_CAP_MS=${RMQ_POLL_CAP_MS:-5000}

LIB="$RMQ_HOME/lib"
CONF="$RMQ_HOME/conf"
RUN="$RMQ_HOME/run"
LOGS="$RMQ_HOME/logs"
STORE="$RMQ_HOME/store"
NAMESRV_ADDR="127.0.0.1:$RMQ_NAMESRV_PORT"

log() { printf 'rmq: %s\n' "$*" >&2; }
die() { printf 'rmq: error: %s\n' "$*" >&2; exit 1; }

# Common JVM flags for JDK 17. The stock runserver.sh/runbroker.sh use 4-8 GiB
# heaps, AlwaysPreTouch, 15 GiB direct memory and -XX:-UseBiasedLocking (a
# warning on 17); none of that fits a 2-core CI box. user.home points at the
# cache so RocketMQ's own logback files (${user.home}/logs/rocketmqlogs) and
# the default store stay there; rocketmq.home.dir replaces ROCKETMQ_HOME.
jvm_flags() {
	local heap=$1
	printf '%s\n' -server "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC -XX:G1HeapRegionSize=16m \
		-XX:-OmitStackTraceInFastThrow -XX:+ExitOnOutOfMemoryError -Xss512k \
		"-Duser.home=$RMQ_HOME" "-Drocketmq.home.dir=$RMQ_HOME" \
		-Drocketmq.client.logUseSlf4j=false -Djava.net.preferIPv4Stack=true \
		--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
		--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED \
		-Dio.netty.tryReflectionSetAccessible=true
}

# ---------------------------------------------------------------- fetch

fetch_stamp() {
	# The stamp names the version and the pom's content: a changed pom refetches.
	echo "$LIB/.complete-$RMQ_VERSION-$(sha256sum "$HERE/pom.xml" | cut -c1-12)"
}

cmd_fetch() {
	local stamp
	stamp=$(fetch_stamp)
	if [[ -f $stamp ]]; then
		log "fetch: $LIB is complete ($(basename "$stamp")), skipped"
		return
	fi
	command -v mvn >/dev/null || die "fetch: mvn not found (apt-get install maven)"
	log "fetch: downloading RocketMQ $RMQ_VERSION jars into $LIB"
	local tmp="$LIB.tmp.$$"
	rm -rf "$tmp"
	local t0=$SECONDS
	if ! mvn -B -q -f "$HERE/pom.xml" "-Drmq.version=$RMQ_VERSION" \
		dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$tmp" >"$RMQ_HOME/fetch.log" 2>&1; then
		tail -30 "$RMQ_HOME/fetch.log" >&2
		rm -rf "$tmp"
		die "fetch: mvn failed (full log: $RMQ_HOME.fetch.log)"
	fi
	local j
	for j in namesrv broker proxy tools; do
		compgen -G "$tmp/rocketmq-$j-*.jar" >/dev/null || die "fetch: rocketmq-$j missing from $tmp"
	done
	rm -rf "$LIB"
	mv "$tmp" "$LIB"
	touch "$(fetch_stamp)"
	log "fetch: $(ls "$LIB"/*.jar | wc -l) jars in $((SECONDS - t0)) s: $(cd "$LIB" && ls rocketmq-{namesrv,broker,proxy,tools}-*.jar | tr '\n' ' ')"
}

need_lib() {
	[[ -f $(fetch_stamp) ]] || die "no complete jar cache in $LIB: run '$0 fetch' first"
}

# ---------------------------------------------------------------- process helpers

pidfile() { echo "$RUN/$1.pid"; }

# running NAME: true when NAME's pid file names a live process.
running() {
	local f pid
	f=$(pidfile "$1")
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for NAME WHAT CMD...: poll CMD every 0.2 s until it succeeds, NAME's
# process dies, or RMQ_TIMEOUT passes.
wait_for() {
	local name=$1 what=$2
	shift 2
	local deadline=$((SECONDS + RMQ_TIMEOUT))
	until "$@"; do
		if ! running "$name"; then
			log "$name exited while waiting for $what; last lines of $LOGS/$name.out:"
			tail -40 "$LOGS/$name.out" >&2 || true
			die "$name failed to start"
		fi
		if ((SECONDS >= deadline)); then
			tail -40 "$LOGS/$name.out" >&2 || true
			die "$name: no $what after ${RMQ_TIMEOUT}s (see $LOGS/$name.out and $LOGS/rocketmqlogs)"
		fi
		sleep 0.2
	done
}

log_has() { grep -qF -- "$2" "$LOGS/$1.out" 2>/dev/null; }

# launch NAME HEAP MAINCLASS ARGS...: start a JVM in its own session, record its pid.
launch() {
	local name=$1 heap=$2 main=$3
	shift 3
	mkdir -p "$RUN" "$LOGS"
	local -a flags
	mapfile -t flags < <(jvm_flags "$heap")
	# setsid in a subshell: the JVM gets its own session and is not a child
	# of this script, so it outlives the calling shell (CI steps, go test)
	# and a later `wait` here never waits for it. setsid does not fork (the
	# background child is no group leader), so $! is the JVM's pid.
	(
		setsid java "${flags[@]}" -cp "$LIB/*" "$main" "$@" >"$LOGS/$name.out" 2>&1 </dev/null &
		echo $! >"$(pidfile "$name")"
	)
}

# stop_one NAME: TERM, wait up to 30 s for the shutdown hooks, then KILL.
stop_one() {
	local name=$1 pid
	if ! running "$name"; then
		rm -f "$(pidfile "$name")"
		return
	fi
	pid=$(<"$(pidfile "$name")")
	log "stop: $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + 30))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "stop: $name did not exit in 30 s, sending KILL"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	rm -f "$(pidfile "$name")"
}

check_port_free() {
	local name=$1 port=$2
	if port_open "$port"; then
		die "$name: port $port is already in use by another process (set RMQ_*_PORT)"
	fi
}

# ---------------------------------------------------------------- configs

# broker_conf FILE NAME PORT STORE: one broker of the cluster.
broker_conf() {
	cat >"$1" <<EOF
brokerClusterName=$RMQ_CLUSTER
brokerName=$2
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$3
namesrvAddr=$NAMESRV_ADDR
storePathRootDir=$4
storePathCommitLog=$4/commitlog
# 256 MiB CommitLog files instead of 1 GiB: the first start preallocates one.
mappedFileSizeCommitLog=268435456
deleteWhen=04
fileReservedTime=48
autoCreateTopicEnable=false
autoCreateSubscriptionGroup=false
enableLmq=true
enableMultiDispatch=true
# Per-client pending-event queue when the group sets none (the group's
# lite.sub.client.max.event.cnt, set by init, wins). With more active
# LiteTopics per client than this, dispatch falls back to a full scan
# every 10-25 s.
maxClientEventCount=$RMQ_LITE_EVENT_CAP
# A send may wait 1 s in the broker's send queue before it is refused with
# "[TIMEOUT_CLEAN_QUEUE]broker busy" (a 429 to the client). The default,
# 200 ms, refused sends of a 300-LiteTopic burst on a loaded 2-core machine.
waitTimeMillsInSendQueue=1000
EOF
}

write_configs() {
	mkdir -p "$CONF" "$STORE"
	cat >"$CONF/namesrv.conf" <<EOF
listenPort=$RMQ_NAMESRV_PORT
bindAddress=127.0.0.1
EOF
	broker_conf "$CONF/broker.conf" "$RMQ_BROKER_NAME" "$RMQ_BROKER_PORT" "$STORE"
	broker_conf "$CONF/broker-b.conf" broker-b "$RMQ_BROKER_B_PORT" "$STORE-b"
	cat >"$CONF/rmq-proxy.json" <<EOF
{
  "rocketMQClusterName": "$RMQ_CLUSTER",
  "namesrvAddr": "$NAMESRV_ADDR",
  "proxyMode": "cluster",
  "grpcServerPort": $RMQ_PROXY_PORT,
  "remotingListenPort": $RMQ_PROXY_REMOTING_PORT,
  "maxLiteTopicSize": 64,
  "minInvisibleTimeMillsForRecv": 10000,
  "maxInvisibleTimeMills": 43200000,
  "topicRouteServiceCacheRefreshSeconds": 5,
  "topicConfigCacheRefreshSeconds": 5,
  "subscriptionGroupConfigCacheRefreshSeconds": 5,
  "grpcClientConsumerMaxLongPollingTimeoutMillis": $RMQ_POLL_CAP_MS
}
EOF
}

# ---------------------------------------------------------------- start

mqadmin() {
	local -a flags
	mapfile -t flags < <(jvm_flags 256m)
	java "${flags[@]}" -XX:TieredStopAtLevel=1 -cp "$LIB/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
}

broker_in_cluster() {
	mqadmin clusterList -n "$NAMESRV_ADDR" 2>/dev/null | grep -qw "$RMQ_BROKER_NAME"
}

start_namesrv() {
	if running namesrv; then
		log "start: namesrv already running (pid $(<"$(pidfile namesrv)"))"
	else
		check_port_free namesrv "$RMQ_NAMESRV_PORT"
		launch namesrv "$RMQ_NAMESRV_HEAP" org.apache.rocketmq.namesrv.NamesrvStartup -c "$CONF/namesrv.conf"
	fi
	wait_for namesrv "'The Name Server boot success'" log_has namesrv "The Name Server boot success"
	wait_for namesrv "port $RMQ_NAMESRV_PORT" port_open "$RMQ_NAMESRV_PORT"
}

start_broker() {
	if running broker; then
		log "start: broker already running (pid $(<"$(pidfile broker)"))"
	else
		check_port_free broker "$RMQ_BROKER_PORT"
		launch broker "$RMQ_BROKER_HEAP" org.apache.rocketmq.broker.BrokerStartup -c "$CONF/broker.conf" -n "$NAMESRV_ADDR"
	fi
	wait_for broker "boot line" log_has broker "The broker[$RMQ_BROKER_NAME, 127.0.0.1:$RMQ_BROKER_PORT] boot success"
	wait_for broker "port $RMQ_BROKER_PORT" port_open "$RMQ_BROKER_PORT"
	wait_for broker "$RMQ_BROKER_NAME in clusterList" broker_in_cluster
}

# start_proxy starts the proxy and waits for it. The cluster-mode proxy
# exits during startup when the broker is slow to answer its admin calls
# (ProxyException "create system broadcast topic DefaultHeartBeatSyncerTopic
# failed", seen on a loaded 2-core machine); as a supervisor would, it is
# launched again, up to 3 times in all.
start_proxy() {
	local try
	for try in 1 2 3; do
		if running proxy; then
			log "start: proxy already running (pid $(<"$(pidfile proxy)"))"
		else
			check_port_free proxy "$RMQ_PROXY_PORT"
			launch proxy "$RMQ_PROXY_HEAP" org.apache.rocketmq.proxy.ProxyStartup \
				-pm cluster -pc "$CONF/rmq-proxy.json" -n "$NAMESRV_ADDR"
		fi
		local deadline=$((SECONDS + RMQ_TIMEOUT))
		until log_has proxy "rocketmq-proxy startup successfully" || ! running proxy || ((SECONDS >= deadline)); do
			sleep 0.2
		done
		if running proxy || ((try == 3)); then
			break
		fi
		log "start: proxy exited during startup ($(grep -m1 -o 'ProxyException: .*' "$LOGS/proxy.out" || echo 'see proxy.out')); launching it again"
		cp "$LOGS/proxy.out" "$LOGS/proxy.out.$try"
	done
	wait_for proxy "'rocketmq-proxy startup successfully'" log_has proxy "rocketmq-proxy startup successfully"
	wait_for proxy "gRPC port $RMQ_PROXY_PORT" port_open "$RMQ_PROXY_PORT"
}

cmd_start() {
	need_lib
	command -v java >/dev/null || die "java not found (JDK 17 needed)"
	write_configs
	local t0=$SECONDS t1
	start_namesrv
	t1=$SECONDS
	log "start: namesrv ready on $NAMESRV_ADDR ($((t1 - t0)) s)"
	start_broker
	log "start: broker ready on 127.0.0.1:$RMQ_BROKER_PORT ($((SECONDS - t1)) s)"
	t1=$SECONDS
	start_proxy
	log "start: proxy ready on 127.0.0.1:$RMQ_PROXY_PORT ($((SECONDS - t1)) s)"
	log "start: RocketMQ ready in $((SECONDS - t0)) s (logs in $LOGS)"
}

cmd_restart_proxy() {
	need_lib
	write_configs
	stop_one proxy
	local t0=$SECONDS
	start_proxy
	log "restart-proxy: proxy ready in $((SECONDS - t0)) s"
}

broker_b_in_cluster() {
	mqadmin clusterList -n "$NAMESRV_ADDR" 2>/dev/null | grep -qw broker-b
}

cmd_start_b() {
	need_lib
	running namesrv || die "start-b: the name server is not running (run '$0 start')"
	write_configs
	if running broker-b; then
		log "start-b: broker-b already running (pid $(<"$(pidfile broker-b)"))"
	else
		check_port_free broker-b "$RMQ_BROKER_B_PORT"
		launch broker-b "$RMQ_BROKER_HEAP" org.apache.rocketmq.broker.BrokerStartup -c "$CONF/broker-b.conf" -n "$NAMESRV_ADDR"
	fi
	wait_for broker-b "boot line" log_has broker-b "The broker[broker-b, 127.0.0.1:$RMQ_BROKER_B_PORT] boot success"
	wait_for broker-b "broker-b in clusterList" broker_b_in_cluster
	log "start-b: broker-b ready on 127.0.0.1:$RMQ_BROKER_B_PORT"
}

cmd_restart_broker() {
	need_lib
	write_configs
	stop_one broker
	local t0=$SECONDS
	start_broker
	log "restart-broker: broker ready in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- init

cmd_init() {
	need_lib
	running broker || die "init: the broker is not running (run '$0 start')"
	log "init: topic $RMQ_TOPIC (message.type=LITE), group $RMQ_GROUP (lite.bind.topic=$RMQ_TOPIC)"
	mkdir -p "$RUN"
	# updateTopic/updateSubGroup are create-or-update, so init is idempotent.
	# Each mqadmin JVM takes seconds; the independent ones run in parallel.
	# The parent topic must exist before a group can be bound to it.
	# DefaultHeartBeatSyncerTopic and its group are the cluster-mode proxy's
	# own; with autoCreate off the broker logs a failed pull for them every
	# second until they exist.
	mqadmin updateTopic -n "$NAMESRV_ADDR" -c "$RMQ_CLUSTER" -t "$RMQ_TOPIC" \
		-a "+message.type=LITE,+lite.topic.expiration=$RMQ_LITE_EXPIRATION" >"$RUN/init-topic.out" 2>&1 &
	local p1=$!
	mqadmin updateTopic -n "$NAMESRV_ADDR" -c "$RMQ_CLUSTER" -t DefaultHeartBeatSyncerTopic >"$RUN/init-sync-topic.out" 2>&1 &
	local p2=$!
	mqadmin updateSubGroup -n "$NAMESRV_ADDR" -c "$RMQ_CLUSTER" -g CID_DefaultHeartBeatSyncerTopic >"$RUN/init-sync-group.out" 2>&1 &
	local p3=$!
	wait $p1 || { cat "$RUN/init-topic.out" >&2; die "init: updateTopic $RMQ_TOPIC failed"; }
	# lite.sub.client.quota: LiteTopics per client (default 2000; the proxy
	# refuses a PARTIAL_ADD beyond it and a full sync beyond quota+300).
	# lite.sub.client.max.event.cnt: see maxClientEventCount in broker.conf.
	mqadmin updateSubGroup -n "$NAMESRV_ADDR" -c "$RMQ_CLUSTER" -g "$RMQ_GROUP" -r 16 \
		--attributes "+lite.bind.topic=$RMQ_TOPIC,+lite.sub.client.quota=$RMQ_LITE_CLIENT_QUOTA,+lite.sub.client.max.event.cnt=$RMQ_LITE_EVENT_CAP" >"$RUN/init-group.out" 2>&1 ||
		{ cat "$RUN/init-group.out" >&2; die "init: updateSubGroup $RMQ_GROUP failed"; }
	wait $p2 || log "init: warning: could not create DefaultHeartBeatSyncerTopic (see $RUN/init-sync-topic.out)"
	wait $p3 || log "init: warning: could not create CID_DefaultHeartBeatSyncerTopic (see $RUN/init-sync-group.out)"
	verify_init
}

verify_init() {
	# Three lookups in parallel: each mqadmin JVM takes a few seconds.
	local d="$RUN/verify"
	rm -rf "$d"
	mkdir -p "$d"
	mqadmin topicRoute -n "$NAMESRV_ADDR" -t "$RMQ_TOPIC" >"$d/route" 2>&1 &
	local p1=$!
	mqadmin getParentTopicInfo -n "$NAMESRV_ADDR" -p "$RMQ_TOPIC" >"$d/parent" 2>&1 &
	local p2=$!
	mqadmin getConsumerConfig -n "$NAMESRV_ADDR" -g "$RMQ_GROUP" >"$d/group" 2>&1 &
	local p3=$!
	wait $p1 $p2 $p3 || true # the greps below judge the output
	grep -q "\"brokerName\":\"$RMQ_BROKER_NAME\"" "$d/route" ||
		{ cat "$d/route" >&2; die "init: topicRoute: $RMQ_TOPIC has no route on $RMQ_BROKER_NAME"; }
	# getParentTopicInfo lists the groups bound to a LITE parent topic.
	grep -q "$RMQ_BROKER_NAME.*\[.*$RMQ_GROUP.*\]" "$d/parent" ||
		{ cat "$d/parent" >&2; die "init: getParentTopicInfo: $RMQ_TOPIC is not a LITE parent bound to $RMQ_GROUP"; }
	grep -q "lite.bind.topic=$RMQ_TOPIC" "$d/group" ||
		{ cat "$d/group" >&2; die "init: getConsumerConfig: $RMQ_GROUP lacks lite.bind.topic=$RMQ_TOPIC"; }
	! grep -q 'lite.sub.wildcard' "$d/group" ||
		die "init: $RMQ_GROUP has lite.sub.wildcard; per-replica LiteTopics need it absent"
	log "init: verified: $RMQ_TOPIC routed on $RMQ_BROKER_NAME, LITE parent of $RMQ_GROUP, group bound, no wildcard"
}

# ---------------------------------------------------------------- stop / status / env

cmd_stop() {
	stop_one proxy
	stop_one broker-b
	stop_one broker
	stop_one namesrv
}

cmd_status() {
	local n rc=0
	for n in namesrv broker broker-b proxy; do
		if [[ $n == broker-b ]] && ! running broker-b; then
			continue # optional
		fi
		if running "$n"; then
			printf '%-8s running (pid %s)\n' "$n" "$(<"$(pidfile "$n")")"
		else
			printf '%-8s stopped\n' "$n"
			rc=1
		fi
	done
	local p
	for p in "namesrv $RMQ_NAMESRV_PORT" "broker $RMQ_BROKER_PORT" "proxy-grpc $RMQ_PROXY_PORT"; do
		set -- $p
		if port_open "$2"; then printf '%-11s 127.0.0.1:%s open\n' "$1" "$2"; else printf '%-11s 127.0.0.1:%s closed\n' "$1" "$2"; fi
	done
	return $rc
}

cmd_env() {
	cat <<EOF
PACEGATE_ROCKETMQ_ENDPOINT=127.0.0.1:$RMQ_PROXY_PORT
PACEGATE_ROCKETMQ_TOPIC=$RMQ_TOPIC
PACEGATE_ROCKETMQ_GROUP=$RMQ_GROUP
PACEGATE_ROCKETMQ_SCRIPT=$HERE/rmq.sh
EOF
	# The store of every running broker group, for the test that checks
	# where each LiteTopic's queue lives.
	local stores=$STORE
	if running broker-b; then stores+=":$STORE-b"; fi
	echo "PACEGATE_ROCKETMQ_BROKER_STORES=$stores"
}

cmd_clean() {
	cmd_stop
	rm -rf "$STORE" "$STORE-b" "$LOGS" "$CONF" "$RUN"
	log "clean: removed store, logs, configs (jars kept in $LIB)"
}

# ---------------------------------------------------------------- main

[[ $# -gt 0 ]] || { sed -n '2,36p' "$0"; exit 2; }
mkdir -p "$RMQ_HOME"
for c in "$@"; do
	case $c in
	fetch) cmd_fetch ;;
	start) cmd_start ;;
	init) cmd_init ;;
	stop) cmd_stop ;;
	restart-proxy) cmd_restart_proxy ;;
	restart-broker) cmd_restart_broker ;;
	start-b) cmd_start_b ;;
	stop-b) stop_one broker-b ;;
	status) cmd_status ;;
	env) cmd_env ;;
	clean) cmd_clean ;;
	*) die "unknown subcommand '$c' (fetch start init stop restart-proxy restart-broker start-b stop-b status env clean)" ;;
	esac
done
