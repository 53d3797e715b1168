#!/bin/sh
# Installs Debian's chromium for the headless UI test (gateway/admin), once.
# Idempotent: does nothing when a chromium binary is already on PATH.
# Usage: scripts/chromium.sh   (as root, or with sudo available)
set -eu

for bin in chromium chromium-browser google-chrome; do
	if command -v "$bin" >/dev/null 2>&1; then
		echo "chromium.sh: $(command -v "$bin") already installed"
		exit 0
	fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# Try with the package lists the machine has; refresh them only when that
# fails (missing or stale lists), so reruns stay fast.
if ! $SUDO apt-get install -y --no-install-recommends chromium fonts-liberation; then
	$SUDO apt-get update
	$SUDO apt-get install -y --no-install-recommends chromium fonts-liberation
fi
command -v chromium
chromium --version
