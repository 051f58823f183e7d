#!/usr/bin/env bash
# build-s3.sh builds versitygw, the real S3 server the blob store tests run
# on loopback (S3 over a posix directory), and prints its path. Like
# build-servers.sh it builds from source with the Go toolchain alone, from
# the nested module s3bin/ (github.com/versity/versitygw/cmd/versitygw as a
# go.mod tool directive), and caches the binary under
#
#   ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/s3-<key>/versitygw
#
# where <key> hashes s3bin's go.mod and go.sum, the Go version, GOOS/GOARCH
# and the build recipe. It is a script of its own so that changing
# versitygw's version does not change build-servers.sh's key (and rebuild
# kube-apiserver). Only the path goes to stdout; progress goes to stderr,
# every 30 seconds while it builds.
set -euo pipefail

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
		cat "$here/s3bin/go.mod" "$here/s3bin/go.sum"
	} | sha256sum | cut -c1-16
)"
out="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}/s3-$key"
mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$out/.lock"
	flock 9
fi
if [[ ! -x "$out/versitygw" ]]; then
	note=" (a cold build took about 2.5 minutes on a 2-core machine)"
	echo "build-s3.sh: building versitygw into $out$note" >&2
	tmp="$out/.versitygw.tmp.$$"
	start=$SECONDS
	rm -f "$tmp"
	(cd "$here/s3bin" && "$go_cmd" build "${build_flags[@]}" -ldflags="$ldflags" -o "$tmp" github.com/versity/versitygw/cmd/versitygw) >&2 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		for ((i = 0; i < 30; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "build-s3.sh: still building versitygw: $((SECONDS - start))s so far$note" >&2
		fi
	done
	if ! wait "$pid"; then
		rm -f "$tmp"
		echo "build-s3.sh: building versitygw failed" >&2
		exit 1
	fi
	mv -f "$tmp" "$out/versitygw"
	echo "build-s3.sh: built versitygw in $((SECONDS - start))s" >&2
fi
echo "$out/versitygw"
