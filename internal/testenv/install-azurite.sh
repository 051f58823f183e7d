#!/usr/bin/env bash
# install-azurite.sh installs Azurite, the real Azure Blob Storage emulator
# the blob store tests run on loopback, from npm (a pinned version) into
#
#   ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/azurite-<version>
#
# once, and prints the path of its azurite-blob program. Node.js and npm
# come from the machine, or from Debian's nodejs and npm packages when
# missing (that needs root, as CI runs). Only the path goes to stdout;
# progress goes to stderr.
set -euo pipefail

version=3.37.0
dir="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}/azurite-$version"
exe="$dir/node_modules/.bin/azurite-blob"
mkdir -p "$dir"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$dir/.lock"
	flock 9
fi
if [[ -x "$exe" ]]; then
	echo "$exe"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "install-azurite.sh: node and npm are missing: install Debian's nodejs and npm packages (needs root)" >&2
		exit 1
	fi
	echo "install-azurite.sh: installing Debian's nodejs and npm packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends nodejs npm >&2
fi
echo "install-azurite.sh: installing azurite@$version from npm into $dir (about a minute)" >&2
# The package file pins what azurite's own ranges leave open, so that the
# install is the same every time: @azure/msal-node 7.2.1 and
# @azure/msal-browser 5.29.0 (through tedious' @azure/identity), whose
# exact @azure/msal-common (16.16.1) the registry serves (the newest ones
# want 16.18.0, which it did not).
cat >"$dir/package.json" <<JSON
{
  "name": "talon-test-azurite",
  "private": true,
  "dependencies": {"azurite": "$version"},
  "overrides": {"@azure/msal-node": "7.2.1", "@azure/msal-browser": "5.29.0"}
}
JSON
(cd "$dir" && npm install --no-audit --no-fund --loglevel=error) >&2
if [[ ! -x "$exe" ]]; then
	echo "install-azurite.sh: npm installed azurite, but $exe is missing" >&2
	exit 1
fi
echo "$exe"
