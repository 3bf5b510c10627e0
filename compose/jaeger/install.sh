#!/usr/bin/env bash
# Builds Jaeger, at the version this folder's go.mod pins, into
# ${HOOKLINE_TOOLS_DIR:-${XDG_CACHE_HOME:-~/.cache}/hookline-tools}/jaeger-<version>/jaeger
# (outside the checkout, so every clone and worktree of the user shares one
# build) unless it is there already, and prints its path. A cold build compiles
# the whole collector (docs/development.md says how long it takes); later
# runs print the path at once. `make observe`, .ci/run and the tracing
# system test (pkg/testkit/e2e) use this binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(grep -oE 'github.com/jaegertracing/jaeger v[0-9][^ ]*' "$here/go.mod" | head -1 | cut -d' ' -f2)
[ -n "$version" ] || { echo "jaeger: no version of github.com/jaegertracing/jaeger in $here/go.mod" >&2; exit 1; }
tools=${HOOKLINE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline-tools}
bin=$tools/jaeger-$version/jaeger
if [ ! -x "$bin" ]; then
  echo "jaeger: building $version into $bin (once; a cold build takes minutes)" >&2
  mkdir -p "$(dirname "$bin")"
  started=$SECONDS
  (cd "$here" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -buildvcs=false \
    -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$bin.tmp" "$bin"
  echo "jaeger: built in $((SECONDS - started))s" >&2
fi
echo "$bin"
