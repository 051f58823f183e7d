#!/usr/bin/env bash
# build-gcs.sh builds fake-gcs-server, the real Google Cloud Storage
# emulator the blob store tests run on loopback, from the nested module
# gcsbin/ and prints its path; build-tool.sh says how it is built and
# cached (gcs-<key>/fake-gcs-server).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-tool.sh" gcs gcsbin github.com/fsouza/fake-gcs-server "a cold build took about 2 minutes on a 2-core machine"
