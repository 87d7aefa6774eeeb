#!/usr/bin/env bash
# The test suite, with the race detector, in two parts that CI (.ci/run)
# both runs:
#   ./test.sh        formatting, vet, and every test but the long ones
#   ./test.sh long   the long tests alone: those that call gittest.Long
#                    (the Docker build, the longest load and crash tests)
#                    and those that call gittest.Size, at their long size
#                    (agreement and property tests: more cases of each kind)
# Some tests drive real JavaScript libraries (the reference SDK, the MCP
# SDK, ...), each pinned by a package-lock.json in a testdata folder; they
# are installed here when node is present.
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-quick}
case $mode in
  quick | long) ;;
  *) echo "usage: ./test.sh [long]" >&2; exit 2 ;;
esac
# They are installed all at once, beside the formatting check, vet and
# the compiles, and go test starts once they are in (npm_wait): one after
# another before everything else they took ~65 s of a fresh clone's wall
# time, most of it npm waiting, for ~4 s of CPU each.
npm_jobs=()
if command -v npm >/dev/null; then
  for lock in $(git ls-files '*package-lock.json'); do
    dir=$(dirname "$lock")
    if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$lock" -nt "$dir/node_modules/.package-lock.json" ]; then
      echo "== npm ci in $dir (beside what follows)"
      log=$(mktemp)
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 &
      npm_jobs+=("$!:$dir:$log")
    fi
  done
fi
npm_wait() {
  local job pid dir log failed=0
  for job in ${npm_jobs[@]+"${npm_jobs[@]}"}; do
    IFS=: read -r pid dir log <<<"$job"
    if ! wait "$pid"; then
      echo "npm ci in $dir failed:"
      failed=1
    fi
    cat "$log"
    rm -f "$log"
  done
  npm_jobs=()
  return $failed
}
# Those still running when the script stops early (gofmt's or vet's
# failure, an interrupt) are stopped.
npm_stop() {
  local job pid dir log
  for job in ${npm_jobs[@]+"${npm_jobs[@]}"}; do
    IFS=: read -r pid dir log <<<"$job"
    kill "$pid" 2>/dev/null || true
    rm -f "$log"
  done
}
# A program built with -race sleeps a second as it exits, for reports of
# races still under way (atexit_sleep_ms), and the tests start gitmem
# (such a build) hundreds of times. A race is still reported when it
# happens, and the program still exits with status 66 after one.
export GORACE="atexit_sleep_ms=0 ${GORACE:-}"
# The tests' temporary folders (t.TempDir: the repositories they make and
# remove) go on a tmpfs when the machine has one with room and TMPDIR is
# not set: on this machine's ext4 each file created looked for a free
# inode (the kernel's recently_deleted) and each sync waited for the disk,
# ~27% of the gitmem package's CPU. Nothing the tests check depends on the
# disk: the crash tests kill processes (what a process wrote survives its
# kill either way), the full-disk tests mount a small tmpfs of their own,
# and the syncs are still made (the tests that count them count them).
cleanup() { npm_stop; }
trap cleanup EXIT
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
  [ "$(df -k --output=avail /dev/shm | tail -1)" -gt $((2 * 1024 * 1024)) ]; then
  TMPDIR=$(mktemp -d /dev/shm/gitmem-test.XXXXXX)
  export TMPDIR
  cleanup() {
    npm_stop
    rm -rf "$TMPDIR" || true
  }
fi
# -trimpath: what is compiled does not name the checkout's folder, so a new
# clone (CI's, of a commit built before in another folder) finds the
# module's packages in the build cache instead of compiling them all again
# with -race. No test reads its own source's path (stack traces name
# packages and functions, as before).
flags="-race -trimpath"
# go test gives a package 10 minutes; the gitmem package takes a few on a
# quiet machine here and took more than ten on one busy with other work
# (load average 25): the bound is for a hang, not for a slow machine.
timeout=30m
if [ "$mode" = long ]; then
  # The long tests, and those whose size is larger here (gittest.Size):
  # each test function that calls gittest.Long or gittest.Size.
  long=$(awk '/^func / { name = "" } /^func Test[A-Za-z0-9_]*\(/ { name = $2; sub(/\(.*/, "", name) }
    /gittest\.(Long|Size)\(t/ && name != "" { print name }' $(git ls-files '*_test.go') | sort -u | paste -sd'|' -)
  if [ -z "$long" ]; then echo "no long test found"; exit 1; fi
  echo "== GITMEM_LONG=1 go test -race, the long tests: $long"
  npm_wait
  GITMEM_LONG=1 go test $flags -count=1 -timeout $timeout -run "^($long)\$" ./...
  exit
fi
echo "== gofmt, go vet, a type-check for macOS and Windows"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
# Every package type-checks for macOS and Windows too, and all it imports
# but their function bodies: from source, not built (a build for each
# compiled everything once more, about 5 minutes of CPU a system on a
# fresh machine here). It runs beside vet and the tests (~9 s of CPU)
# and prints nothing unless it fails.
go run -trimpath ./internal/crosscheck darwin/arm64 windows/amd64 &
cross=$!
trap 'kill $cross 2>/dev/null; cleanup' EXIT
# With -race, vet compiles each package as the tests below do: a fresh
# machine compiles them once, not once for vet and again for the tests.
go vet $flags ./...
# go test starts the packages' tests in the order it is given them, two at
# a time (-p: the cores), and reports each package in that order; for ./...
# that is the import paths' order, which started the longest package
# (gitmem) third, after cmd/gitmem and console, and left it running alone
# at the end. The longest go first, the others after in the usual order.
longest="gitmem cmd/gitmem console gitmem/internal/gitdir handler"
mod=$(go list -m)
pkgs=$(go list ./... | awk -v mod="$mod" -v longest="$longest" '
  BEGIN { n = split(longest, l, " "); for (i = 1; i <= n; i++) rank[mod "/" l[i]] = i }
  { printf "%03d %s\n", ($0 in rank) ? rank[$0] : 999, $0 }' | sort -s -n -k1,1 | cut -d" " -f2)
echo "== go test -race, every package (a few minutes; the longest first, each reported in that order; the long tests skip: ./test.sh long)"
status=0
npm_wait
go test $flags -count=1 -timeout $timeout $pkgs || status=$?
if ! wait $cross; then
  echo "the type-check for macOS and Windows failed (above)"
  status=1
fi
trap cleanup EXIT
exit $status
