#!/usr/bin/env bash
# Ensure promtool for the alert-rule and metrics tests of package deploy
# (promtool check rules, test rules, check metrics).
#
# Idempotent: when promtool is on PATH (or $TALON_PROMTOOL is set) it prints
# the path and exits. Otherwise it installs Debian's prometheus package, which
# ships promtool and needs root (CI runs as root). The package's own service
# is not wanted: policy-rc.d keeps apt from starting it. Prints the path on
# stdout; the rest goes to stderr.
set -euo pipefail

if [ -n "${TALON_PROMTOOL:-}" ]; then
	if [ -x "$TALON_PROMTOOL" ]; then echo "$TALON_PROMTOOL"; exit 0; fi
	echo "ensure-promtool: TALON_PROMTOOL=$TALON_PROMTOOL is not an executable file" >&2
	exit 1
fi
if bin=$(command -v promtool); then
	echo "$bin"
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "ensure-promtool: promtool is missing: install Debian's prometheus package (needs root and apt-get), or set TALON_PROMTOOL" >&2
	exit 1
fi
echo "ensure-promtool: installing Debian's prometheus package (for promtool)" >&2
export DEBIAN_FRONTEND=noninteractive
# Do not start the Prometheus server that the package installs as a service.
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
apt-get install -y --no-install-recommends prometheus >&2
command -v promtool
