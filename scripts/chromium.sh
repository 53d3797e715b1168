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
# apt-get update only when the package lists are empty, so reruns stay fast.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial || true)" ]; then
	$SUDO apt-get update
fi
$SUDO apt-get install -y --no-install-recommends chromium fonts-liberation
command -v chromium
chromium --version
