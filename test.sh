#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector. Some tests drive real JavaScript libraries (the reference SDK,
# the MCP SDK, ...), each pinned by a package-lock.json in a testdata
# folder; they are installed here when node is present.
set -euo pipefail
cd "$(dirname "$0")"
if command -v npm >/dev/null; then
  for lock in $(git ls-files '*package-lock.json'); do
    dir=$(dirname "$lock")
    if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$lock" -nt "$dir/node_modules/.package-lock.json" ]; then
      echo "== npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi
echo "== gofmt, go vet, builds for macOS and Windows"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
go vet ./...
# The binary builds for macOS and Windows too.
for target in darwin/arm64 windows/amd64; do
  GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./cmd/gitmem
done
echo "== go test -race ./... (several minutes; packages report as they finish)"
# A program built with -race sleeps a second as it exits, for reports of
# races still under way (atexit_sleep_ms), and the tests start gitmem
# (such a build) hundreds of times. A race is still reported when it
# happens, and the program still exits with status 66 after one.
export GORACE="atexit_sleep_ms=0 ${GORACE:-}"
go test -race -count=1 ./...
