#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector. The conformance test runs the reference SDK (npm, pinned in
# handler/testdata/reference); it is installed here when node is present.
set -euo pipefail
cd "$(dirname "$0")"
if command -v npm >/dev/null && [ ! -d handler/testdata/reference/node_modules/@anthropic-ai/sdk ]; then
  (cd handler/testdata/reference && npm ci --no-audit --no-fund --loglevel=error)
fi
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
go vet ./...
go test -race -count=1 ./...
