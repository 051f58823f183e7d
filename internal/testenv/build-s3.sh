#!/usr/bin/env bash
# build-s3.sh builds versitygw, the real S3 server the blob store tests run
# on loopback (S3 over a posix directory), from the nested module s3bin/
# and prints its path; build-tool.sh says how it is built and cached
# (s3-<key>/versitygw).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-tool.sh" s3 s3bin github.com/versity/versitygw/cmd/versitygw "a cold build took about 2.5 minutes on a 2-core machine"
