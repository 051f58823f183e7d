#!/usr/bin/env bash
# build-tool.sh NAME MODULE_DIR PACKAGE [NOTE] builds one test tool from its
# nested module and prints its path; build-helm.sh and build-s3.sh call it.
# Like build-servers.sh it builds from source with the Go toolchain alone,
# from the nested module MODULE_DIR (the tool as a go.mod tool directive),
# and caches the binary under
#
#   ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/NAME-<key>/NAME
#
# where <key> hashes MODULE_DIR's go.mod and go.sum, the Go version,
# GOOS/GOARCH and the build recipe: each tool has a key of its own, so
# changing one tool's version rebuilds only it. Only the path goes to
# stdout; progress goes to stderr, every 30 seconds while it builds (NOTE,
# if given, says how long a cold build takes).
set -euo pipefail

name="$1" moddir="$2" pkg="$3" note="${4:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_cmd="${GO:-go}"
export CGO_ENABLED=0
export GOWORK=off
build_flags=(-trimpath -buildvcs=false -mod=readonly)
ldflags="-s -w"
recipe="flags=${build_flags[*]} cgo=${CGO_ENABLED} ldflags=${ldflags}"

key="$(
	{
		printf 'recipe %s\n' "$recipe"
		printf 'go %s %s/%s\n' "$("$go_cmd" env GOVERSION)" "$("$go_cmd" env GOOS)" "$("$go_cmd" env GOARCH)"
		cat "$here/$moddir/go.mod" "$here/$moddir/go.sum"
	} | sha256sum | cut -c1-16
)"
bin="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}/$name-$key"
exe="$(basename "$pkg")"
mkdir -p "$bin"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$bin/.lock"
	flock 9
fi
if [[ ! -x "$bin/$exe" ]]; then
	[[ -n "$note" ]] && note=" ($note)"
	echo "build-tool.sh: building $exe into $bin$note" >&2
	tmp="$bin/.$exe.tmp.$$"
	start=$SECONDS
	rm -f "$tmp"
	(cd "$here/$moddir" && "$go_cmd" build "${build_flags[@]}" -ldflags="$ldflags" -o "$tmp" "$pkg") >&2 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		for ((i = 0; i < 30; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "build-tool.sh: still building $exe: $((SECONDS - start))s so far$note" >&2
		fi
	done
	if ! wait "$pid"; then
		rm -f "$tmp"
		echo "build-tool.sh: building $exe failed" >&2
		exit 1
	fi
	mv -f "$tmp" "$bin/$exe"
	echo "build-tool.sh: built $exe in $((SECONDS - start))s" >&2
fi
echo "$bin/$exe"
