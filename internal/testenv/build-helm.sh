#!/usr/bin/env bash
# build-helm.sh builds the helm binary that the chart tests in deploy/ run
# (helm lint, helm template) from the nested module helmbin/ and prints its
# path; build-tool.sh says how it is built and cached (helm-<key>/helm).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-tool.sh" helm helmbin helm.sh/helm/v4/cmd/helm "a cold build takes a few CPU-minutes"
