#!/usr/bin/env bash
# Ensure the openssl command for the TLS listener tests (openssl s_client
# plays an old or weak client against every listener).
#
# Idempotent: when openssl is on PATH (or $TALON_OPENSSL is set) it prints
# the path and exits. Otherwise it installs Debian's openssl package, which
# needs root (CI runs as root). Prints the path on stdout; the rest goes to
# stderr.
set -euo pipefail

if [ -n "${TALON_OPENSSL:-}" ]; then
	if [ -x "$TALON_OPENSSL" ]; then echo "$TALON_OPENSSL"; exit 0; fi
	echo "ensure-openssl: TALON_OPENSSL=$TALON_OPENSSL is not an executable file" >&2
	exit 1
fi
if bin=$(command -v openssl); then
	echo "$bin"
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "ensure-openssl: openssl is missing: install Debian's openssl package (needs root and apt-get), or set TALON_OPENSSL" >&2
	exit 1
fi
echo "ensure-openssl: installing Debian's openssl package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
apt-get install -y --no-install-recommends openssl >&2
command -v openssl
