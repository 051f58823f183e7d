#!/usr/bin/env bash
# build-jaeger.sh builds Jaeger, the real OTLP trace receiver the tracing
# tests export to and query (all-in-one, in-memory storage), from the
# nested module jaegerbin/ and prints its path; build-tool.sh says how it is
# built and cached (jaeger-<key>/jaeger).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-tool.sh" jaeger jaegerbin github.com/jaegertracing/jaeger/cmd/jaeger "a cold build took about 4 minutes on a 2-core machine"
