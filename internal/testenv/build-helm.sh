#!/usr/bin/env bash
# build-helm.sh builds the helm binary that the chart tests in deploy/ run
# (helm lint, helm template) and prints its path. Like build-servers.sh it
# builds from source with the Go toolchain alone, from the nested module
# helmbin/ (helm.sh/helm/v4/cmd/helm as a go.mod tool directive), and caches
# the binary under
#
#   ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/helm-<key>/helm
#
# where <key> hashes helmbin's go.mod and go.sum, the Go version, GOOS/GOARCH
# and the build recipe. It is a script of its own so that changing helm's
# version does not change build-servers.sh's key (and rebuild kube-apiserver).
# Only the path goes to stdout; progress goes to stderr.
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
		cat "$here/helmbin/go.mod" "$here/helmbin/go.sum"
	} | sha256sum | cut -c1-16
)"
out="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}/helm-$key"
mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$out/.lock"
	flock 9
fi
if [[ ! -x "$out/helm" ]]; then
	echo "build-helm.sh: building helm into $out (a cold build takes a few CPU-minutes)" >&2
	tmp="$out/.helm.tmp.$$"
	start=$SECONDS
	if ! (cd "$here/helmbin" && "$go_cmd" build "${build_flags[@]}" -ldflags="$ldflags" -o "$tmp" helm.sh/helm/v4/cmd/helm) >&2; then
		rm -f "$tmp"
		echo "build-helm.sh: building helm failed" >&2
		exit 1
	fi
	mv -f "$tmp" "$out/helm"
	echo "build-helm.sh: built helm in $((SECONDS - start))s" >&2
fi
echo "$out/helm"
