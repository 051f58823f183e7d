#!/usr/bin/env bash
# build-previous.sh builds the talon binary of the previous release, the
# one the mixed-version suite (make upgrade, internal/integration/upgrade)
# runs beside HEAD, from this repository's own history, and prints its
# path.
#
# The previous release is, in order:
#   1. $TALON_PREVIOUS_RELEASE (any git revision), when set;
#   2. the newest tag reachable from HEAD's parent (git describe --tags), once
#      Talon has tagged releases;
#   3. the commit named on the "commit:" line of previous-release beside
#      this script (c17bbb4 until the first tag).
#
# The source is checked out with `git worktree add --detach` into a
# temporary directory (removed afterwards) and built with the Go toolchain
# alone, version-stamped as goreleaser does (buildinfo.Version is the
# revision's `git describe --tags --always`). The binary is cached under
#
#   ${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/talon/testbin}/previous-<key>/talon
#
# where <key> hashes the commit, the Go version, GOOS/GOARCH and the build
# recipe, so a warm run costs a hash and a stat. Concurrent runs serialise
# on a lock file. Only the path goes to stdout; progress goes to stderr.
# A clone without the commit (a shallow clone) fails with what to do.
#
# Usage: build-previous.sh [--print-ref]
#   --print-ref   print "<commit> <version>" of the previous release; build nothing
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_cmd="${GO:-go}"
repo="$(git -C "$here" rev-parse --show-toplevel)"

ref="${TALON_PREVIOUS_RELEASE:-}"
if [[ -z "$ref" ]]; then
	ref="$(git -C "$repo" describe --tags --abbrev=0 HEAD^ 2>/dev/null || true)"
fi
if [[ -z "$ref" ]]; then
	ref="$(sed -n 's/^commit:[[:space:]]*//p' "$here/previous-release" | head -1)"
fi
if [[ -z "$ref" ]]; then
	echo "build-previous.sh: no previous release: set TALON_PREVIOUS_RELEASE, tag a release, or name a commit in $here/previous-release" >&2
	exit 2
fi
if ! commit="$(git -C "$repo" rev-parse --verify --quiet "$ref^{commit}")"; then
	echo "build-previous.sh: the previous release $ref is not in this clone's history (a shallow clone? run: git fetch --unshallow)" >&2
	exit 2
fi
version="$(git -C "$repo" describe --tags --always "$commit")"
if [[ "${1:-}" == "--print-ref" ]]; then
	echo "$commit $version"
	exit 0
fi

export CGO_ENABLED=0
export GOWORK=off
build_flags=(-trimpath -buildvcs=false -mod=readonly)
ldflags="-s -w -X github.com/talonhq/talon/internal/buildinfo.Version=$version -X github.com/talonhq/talon/internal/buildinfo.Commit=${commit:0:7}"
recipe="flags=${build_flags[*]} cgo=${CGO_ENABLED} ldflags=${ldflags}"
key="$(
	{
		printf 'commit %s\n' "$commit"
		printf 'recipe %s\n' "$recipe"
		printf 'go %s %s/%s\n' "$("$go_cmd" env GOVERSION)" "$("$go_cmd" env GOOS)" "$("$go_cmd" env GOARCH)"
	} | sha256sum | cut -c1-16
)"
dir="${TALON_TESTBIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/talon/testbin}/previous-$key"
mkdir -p "$dir"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$dir/.lock"
	flock 9
fi
if [[ ! -x "$dir/talon" ]]; then
	echo "build-previous.sh: building talon $version ($commit) into $dir (about as long as a build of HEAD's talon)" >&2
	start=$SECONDS
	wt="$(mktemp -d "${TMPDIR:-/tmp}/talon-previous-XXXXXX")"
	cleanup() {
		git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"
		git -C "$repo" worktree prune >/dev/null 2>&1 || true
	}
	trap cleanup EXIT
	git -C "$repo" worktree add --detach --force "$wt" "$commit" >/dev/null 2>&1
	tmp="$dir/.talon.tmp.$$"
	(cd "$wt" && "$go_cmd" build "${build_flags[@]}" -ldflags="$ldflags" -o "$tmp" ./cmd/talon) >&2
	mv -f "$tmp" "$dir/talon"
	echo "build-previous.sh: built talon $version in $((SECONDS - start))s" >&2
fi
echo "$dir/talon"
