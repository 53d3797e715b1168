#!/usr/bin/env bash
# Installs the deploy kit's checking tools under .cache/deploy-tools
# (gitignored), once per pinned version, and prints that directory:
#   bin/promtool  github.com/prometheus/prometheus/cmd/promtool (Go module proxy)
#   bin/helm      helm.sh/helm/v3/cmd/helm (Go module proxy)
#   venv/bin/kubernetes-validate  PyPI: the Kubernetes JSON schemas, offline
# A tool already there at its pinned version is left alone, so a warm run
# costs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Prometheus tags its Go module v0.<minor>.<patch> for release 3.<minor>.<patch>
# (v0.316.0 = 3.16.0, the image deploy/compose.yaml runs).
PROMETHEUS_MODULE_VERSION=v0.316.0
HELM_VERSION=v3.22.0
KUBERNETES_VALIDATE_VERSION=1.37.0

dir="$PWD/.cache/deploy-tools"
mkdir -p "$dir/bin"

# fresh NAME WANT: true unless NAME's stamp records WANT.
fresh() { [[ -f "$dir/.$1.stamp" && "$(cat "$dir/.$1.stamp")" == "$2" ]]; }
stamp() { echo "$2" >"$dir/.$1.stamp"; }

# gotool NAME PACKAGE VERSION [TAGS]: go install PACKAGE@VERSION into bin.
gotool() {
	local name=$1 pkg=$2 version=$3 tags=${4:-} start=$SECONDS
	fresh "$name" "$version $tags" && [[ -x "$dir/bin/$name" ]] && return
	echo "deploy-tools: building $name $version" >&2
	# -mod=mod: the tool is built from its own go.mod, not pacegate's.
	GOFLAGS=-mod=mod GOBIN="$dir/bin" CGO_ENABLED=0 go install -trimpath ${tags:+-tags "$tags"} "$pkg@$version"
	stamp "$name" "$version $tags"
	echo "deploy-tools: $name built in $((SECONDS - start)) s" >&2
}

# remove_all_sd leaves out the cloud service discoveries (AWS, Azure, GCE,
# ...): checking and testing rules needs none, and they are most of the build.
gotool promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_MODULE_VERSION" remove_all_sd
gotool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"

if ! fresh kubernetes-validate "$KUBERNETES_VALIDATE_VERSION" || [[ ! -x "$dir/venv/bin/kubernetes-validate" ]]; then
	start=$SECONDS
	echo "deploy-tools: installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION" >&2
	python3 -m venv "$dir/venv"
	"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
	stamp kubernetes-validate "$KUBERNETES_VALIDATE_VERSION"
	echo "deploy-tools: kubernetes-validate installed in $((SECONDS - start)) s" >&2
fi
echo "$dir"
