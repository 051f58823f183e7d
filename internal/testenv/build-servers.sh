#!/usr/bin/env bash
# build-servers.sh builds the real etcd and kube-apiserver binaries that
# Talon's integration tests start on loopback, and prints the directory that
# holds them:
#
#   <dir>/etcd
#   <dir>/kube-apiserver
#
# Both are built from source with the Go toolchain alone (no downloads other
# than Go modules), from the nested modules beside this script:
#   etcdbin/  go.etcd.io/etcd/server/v3 etcdmain
#   kubebin/  k8s.io/kubernetes/cmd/kube-apiserver (a go.mod tool directive)
#
# <dir> is ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/<key>,
# where <key> hashes the nested modules' go.mod, go.sum and sources, the Go
# version, GOOS/GOARCH and the build recipe below. A binary that already
# exists is not rebuilt, so a warm run costs a hash and two stat calls.
# Builds write to a temporary file and rename it into place, and concurrent
# runs serialise on a lock file, so parallel `go test` processes that all call
# this script build each binary once.
#
# Only the directory goes to stdout; progress and compiler output go to stderr.
# Usage: internal/testenv/build-servers.sh [--print-dir | etcd | kube-apiserver ...]
#   (no argument)   build both
#   etcd, kube-apiserver  build only the named binaries
#   --print-dir     print the directory without building anything
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_cmd="${GO:-go}"

if ! command -v "$go_cmd" >/dev/null 2>&1; then
	echo "build-servers.sh: go toolchain not found (set GO or add go to PATH)" >&2
	exit 1
fi

# The build recipe is part of the cache key: change it and every binary is
# rebuilt. CGO is off so a machine with only Go installed can build both.
export CGO_ENABLED=0
export GOWORK=off
# -buildvcs=false: the nested modules sit inside Talon's git work tree, and
# stamping VCS data would fail in some checkouts and buys nothing here.
build_flags=(-trimpath -buildvcs=false -mod=readonly)
kube_version="v1.37.2"
etcd_version="$(sed -n 's/^\(require\)\{0,1\}[[:space:]]*go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\).*/\2/p' "$here/etcdbin/go.mod" | head -1)"
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
etcd_ldflags="-s -w"
recipe="flags=${build_flags[*]} cgo=${CGO_ENABLED} kube=${kube_ldflags} etcd=${etcd_ldflags}"

goversion="$("$go_cmd" env GOVERSION)"
goos="$("$go_cmd" env GOOS)"
goarch="$("$go_cmd" env GOARCH)"

key="$(
	{
		printf 'recipe %s\n' "$recipe"
		printf 'go %s %s/%s\n' "$goversion" "$goos" "$goarch"
		for f in etcdbin/go.mod etcdbin/go.sum etcdbin/main.go kubebin/go.mod kubebin/go.sum; do
			printf 'file %s\n' "$f"
			cat "$here/$f"
		done
	} | sha256sum | cut -c1-16
)"

cache_root="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}"
out="$cache_root/$key"

want_etcd=0
want_kube=0
for arg in "$@"; do
	case "$arg" in
	--print-dir)
		echo "$out"
		exit 0
		;;
	etcd) want_etcd=1 ;;
	kube-apiserver) want_kube=1 ;;
	*)
		echo "build-servers.sh: unknown argument $arg (want --print-dir, etcd or kube-apiserver)" >&2
		exit 2
		;;
	esac
done
if [[ $want_etcd == 0 && $want_kube == 0 ]]; then
	want_etcd=1
	want_kube=1
fi
mkdir -p "$out"

# Serialise concurrent runs for the same key; flock is in util-linux, which
# every Debian-like system has, but the build is still correct without it
# (temp file + rename), only possibly duplicated.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$out/.lock"
	flock 9
fi

# build NAME MODULE_DIR PACKAGE LDFLAGS builds $out/NAME unless it exists.
build() {
	local name="$1" moddir="$2" pkg="$3" ldflags="$4"
	local dst="$out/$name"
	if [[ -x "$dst" ]]; then
		return 0
	fi
	local tmp="$out/.$name.tmp.$$"
	local start=$SECONDS
	local note=""
	if [[ "$name" == kube-apiserver ]]; then
		note=" (a cold build took 21 to 26 minutes on a 2-core machine)"
	else
		note=" (a cold build took 2.5 to 6 minutes on a 2-core machine)"
	fi
	# An installed binary of the pinned version is used as it is.
	local found
	if found="$(installed "$name")"; then
		ln -sf "$found" "$dst"
		echo "build-servers.sh: using $found (the pinned version) for $name" >&2
		return 0
	fi
	echo "build-servers.sh: building $name into $out$note" >&2
	rm -f "$tmp"
	(cd "$here/$moddir" && "$go_cmd" build "${build_flags[@]}" -ldflags="$ldflags" -o "$tmp" "$pkg") >&2 &
	local pid=$!
	# Progress while it builds, so a long cold build is never silent.
	while ! wait_for "$pid" 30; do
		echo "build-servers.sh: still building $name: $((SECONDS - start))s so far$note" >&2
	done
	if ! wait "$pid"; then
		rm -f "$tmp"
		echo "build-servers.sh: building $name failed" >&2
		return 1
	fi
	mv -f "$tmp" "$dst"
	echo "build-servers.sh: built $name in $((SECONDS - start))s" >&2
}

# wait_for PID SECONDS returns 0 once PID has exited, 1 if it still runs
# after SECONDS.
wait_for() {
	local pid="$1" i
	for ((i = 0; i < $2; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 1
	done
	kill -0 "$pid" 2>/dev/null && return 1
	return 0
}

# installed NAME prints the path of NAME on PATH when its version is the
# one pinned here (TALON_NO_INSTALLED=1 turns this off).
installed() {
	[[ "${TALON_NO_INSTALLED:-}" == 1 ]] && return 1
	local path version
	path="$(command -v "$1" 2>/dev/null)" || return 1
	case "$1" in
	etcd)
		version="$("$path" --version 2>/dev/null | sed -n 's/^etcd Version: //p')"
		[[ -n "$version" && "v$version" == "$etcd_version" ]] || return 1
		;;
	kube-apiserver)
		version="$("$path" --version 2>/dev/null | sed -n 's/^Kubernetes //p')"
		[[ "$version" == "$kube_version" ]] || return 1
		;;
	*) return 1 ;;
	esac
	echo "$path"
}

if [[ $want_etcd == 1 ]]; then
	build etcd etcdbin . "$etcd_ldflags"
fi
if [[ $want_kube == 1 ]]; then
	build kube-apiserver kubebin k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
fi

echo "$out"
