#!/usr/bin/env bash
# Checks the deploy kit (deploy/) with the real tools, installed by
# scripts/deploy-tools.sh; run by .ci/run before make test.
#   1. Prometheus: promtool check config/rules, promtool test rules, and
#      every dashboard query parsed as PromQL by promtool.
#   2. docker compose: the stack loaded by compose-go (compose-spec
#      schema, interpolation), as `docker compose config` would, with no
#      Docker engine needed.
#   3. Helm: lint and template the chart with the default values and
#      with ci/rocketmq-values.yaml, then validate every rendered object
#      against the Kubernetes JSON schemas (strict: no unknown fields) of
#      the oldest and newest supported Kubernetes versions, and the
#      ServiceMonitor against prometheus-operator's Go type.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tools=$(bash scripts/deploy-tools.sh)
export PATH="$tools/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { echo "deploy-check: $*"; }
t0=$SECONDS

step "promtool $(promtool --version 2>&1 | head -1)"
# The compose stack's Prometheus config, with the paths it has inside the
# container pointed at the repository.
echo check-token >"$work/token"
sed -e "s|/run/secrets/pacegate_admin_token|$work/token|" \
	-e "s|/etc/prometheus/rules/|$root/deploy/prometheus/rules/|" \
	deploy/prometheus/prometheus.yml >"$work/prometheus.yml"
promtool check config "$work/prometheus.yml"
promtool check rules deploy/prometheus/rules/*.yml
(cd deploy/prometheus && promtool test rules tests/*.yml)

# Dashboard queries as recording rules, Grafana's variables replaced by
# values, so that promtool parses each one.
"$tools/venv/bin/python" - deploy/grafana/dashboards/*.json >"$work/dashboard-rules.yml" <<'PY'
import json, sys
subst = {"$__rate_interval": "5m", "$__interval": "1m", "$model": ".*", "$tenant": ".*"}
print("groups:")
for path in sys.argv[1:]:
    d = json.load(open(path))
    print(f"  - name: {json.dumps(path)}\n    rules:")
    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))
    exprs = [(p["title"], t["expr"]) for p in panels(d["panels"]) for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        if v["type"] == "query":  # label_values(metric, label) is Grafana's, not PromQL
            q = v["query"]["query"]
            exprs.append((v["name"], q[len("label_values("):q.rindex(",")]))
    for i, (title, e) in enumerate(exprs):
        for k, val in subst.items():
            e = e.replace(k, val)
        print(f"      - record: dashboard:query_{i}\n        expr: {json.dumps(e)}")
PY
promtool check rules "$work/dashboard-rules.yml"
step "prometheus checks: $((SECONDS - t0)) s"

t=$SECONDS
step "compose: loading deploy/compose.yaml with compose-go"
(cd scripts/composecheck && PACEGATE_ADMIN_TOKEN=check-token go run . -q "$root/deploy/compose.yaml")
step "compose check: $((SECONDS - t)) s"

t=$SECONDS
step "$(helm version --short)"
chart=deploy/helm/pacegate
# helm built by go install carries no version of its own, so it would
# assume Kubernetes 1.20; render for the oldest version the chart supports.
kube=1.28.0
helm lint --strict --kube-version "$kube" "$chart"
helm lint --strict --kube-version "$kube" "$chart" -f "$chart/ci/rocketmq-values.yaml"
helm lint --strict --kube-version "$kube" "$chart" -f "$chart/ci/cluster-values.yaml"
helm template pacegate "$chart" --kube-version "$kube" >"$work/default.yaml"
helm template pacegate "$chart" --kube-version "$kube" -f "$chart/ci/rocketmq-values.yaml" >"$work/rocketmq.yaml"
helm template pacegate "$chart" --kube-version "$kube" -f "$chart/ci/cluster-values.yaml" >"$work/cluster.yaml"
# The embedded queue must refuse several replicas.
if helm template pacegate "$chart" --kube-version "$kube" --set replicaCount=2 >/dev/null 2>"$work/err"; then
	echo "deploy-check: the chart accepted replicaCount=2 on the embedded queue" >&2
	exit 1
fi
grep -q "needs config.queue.backend: rocketmq" "$work/err"
step "helm: $((SECONDS - t)) s"

t=$SECONDS
# ServiceMonitor is a CRD: the Kubernetes schemas do not describe it.
"$tools/venv/bin/python" - "$work" <<'PY'
import sys, yaml, os
work = sys.argv[1]
for name in ("default", "rocketmq", "cluster"):
    docs = [d for d in yaml.safe_load_all(open(f"{work}/{name}.yaml")) if d]
    core = [d for d in docs if d["kind"] != "ServiceMonitor"]
    yaml.safe_dump_all(core, open(f"{work}/{name}-core.yaml", "w"))
    print(f"deploy-check: {name}: {', '.join(sorted(d['kind'] for d in docs))}")
PY
for k8s in 1.28.0 1.37.0; do
	"$tools/venv/bin/kubernetes-validate" --strict --quiet -k "$k8s" "$work/default-core.yaml" "$work/rocketmq-core.yaml" "$work/cluster-core.yaml"
done
# ...so the ServiceMonitor is decoded strictly into prometheus-operator's
# own Go type instead.
(cd scripts/crdcheck && go run . "$work/rocketmq.yaml")
step "kubernetes schemas: $((SECONDS - t)) s"
step "ok in $((SECONDS - t0)) s"
