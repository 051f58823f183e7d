#!/usr/bin/env bash
# ensure-tool.sh NAME PACKAGE ENVVAR: ensure a command the tests run (openssl
# for the TLS listener probes, promtool for the alert-rule and metrics
# tests, prometheus for the live-Prometheus alert test; the last two come
# from Debian's prometheus package).
#
# Idempotent: when $ENVVAR names an executable, or NAME is on PATH, it prints
# the path and exits. Otherwise it installs Debian's PACKAGE, which needs root
# (CI runs as root); services the package would start are not started
# (policy-rc.d). Prints the path on stdout; the rest goes to stderr.
set -euo pipefail

if [ $# -ne 3 ]; then
	echo "usage: ensure-tool.sh NAME PACKAGE ENVVAR" >&2
	exit 2
fi
name=$1 package=$2 envvar=$3
given=${!envvar:-}

if [ -n "$given" ]; then
	if [ -x "$given" ]; then echo "$given"; exit 0; fi
	echo "ensure-tool: $envvar=$given is not an executable file" >&2
	exit 1
fi
if bin=$(command -v "$name"); then
	echo "$bin"
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "ensure-tool: $name is missing: install Debian's $package package (needs root and apt-get), or set $envvar" >&2
	exit 1
fi
echo "ensure-tool: installing Debian's $package package (for $name)" >&2
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	created_policy=1
fi
cleanup() { if [ -n "$created_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
apt-get update >&2
apt-get install -y --no-install-recommends "$package" >&2
command -v "$name"
