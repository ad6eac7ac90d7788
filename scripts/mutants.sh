#!/bin/sh
# Mutation testing with cargo-mutants (https://mutants.rs), one scope at a
# time: a whole crate, or some of its files. Prints caught / missed / timeout /
# unviable and the score, caught / (caught + missed + timeout).
#
#   scripts/mutants.sh chipset-hook                       # a whole crate
#   scripts/mutants.sh chipset-loop crates/loop/src/scan.rs crates/loop/src/witness/judge.rs
#   scripts/mutants.sh -s store-core chipset-store crates/store/src/id.rs
#
# Options: -s SCOPE names the results directory (default: the crate, or the
# crate and the first file's stem); -j N runs N mutants at once (default 1:
# each build already uses every core); --fresh starts over instead of
# continuing the last run of the scope with `--iterate` (which skips what was
# caught before, so a second run after new tests only tries the survivors).
# FILE paths are relative to the repository root. Anything after `--` goes to
# cargo mutants as is.
#
# Results go to $MUTANTS_STATE/SCOPE/mutants.out (default MUTANTS_STATE:
# ./mutants.out-state, ignored by git): keep them outside the tree you edit so
# a later session can go on from there. Settings (profile, timeouts, excluded
# test-support files and explained equivalent mutants) are in
# .cargo/mutants.toml.
#
# The tests that read the peers' files need them: CHIPSET_PEER_FIXTURES is
# set to ../shared/fixtures/peers beside the checkout when that exists and the
# variable is unset (cargo-mutants builds a copy of the tree elsewhere, where
# the tests' own lookup beside the checkout finds nothing).
#
# Tests run with 8 threads unless RUST_TEST_THREADS says otherwise: many
# wait rather than compute (mail's gate tests sleep past a 2 s window), so
# more threads than cores finish sooner (mail: 55 s with 2, 19 s with 8).
# Faster still (how the whole crates were run, see ARCHITECTURE.md): put
# cargo-mutants' copies and the tests' temporary folders on a tmpfs
# (TMPDIR=/dev/shm/...), and use nextest (cargo install cargo-nextest),
# which stops a caught mutant at its first failing test instead of waiting
# for the rest of its test binary, so a mutant that leaves one test waiting
# is counted caught once a faster test fails:
#   scripts/mutants.sh chipset-mail -- --test-tool nextest --cargo-test-arg=--max-fail=1:immediate
#
# Not in CI: one mutant costs 10-30 s on a shared 2-core machine (a rebuild
# and the crate's tests): chipset-hook's 201 mutants took 16 minutes, the
# loops' three core files (154) 31 minutes; the store or mail, hours.
set -eu
cd "$(dirname "$0")/.."
scope= jobs=1 fresh=
while [ $# -gt 0 ]; do
    case $1 in
        -s) scope=$2; shift 2 ;;
        -j) jobs=$2; shift 2 ;;
        --fresh) fresh=1; shift ;;
        --) break ;;
        -*) echo "$0: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ] || [ "$1" = -- ]; then
    echo "usage: $0 [-s SCOPE] [-j N] [--fresh] CRATE [FILE...] [-- CARGO_MUTANTS_ARGS...]" >&2
    exit 2
fi
crate=$1; shift
files=
first=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    [ -n "$first" ] || first=$(basename "$1" .rs)
    files="$files -f $1"
    shift
done
[ "${1:-}" = -- ] && shift
if [ -z "$scope" ]; then
    scope=$crate${first:+-$first}
fi
RUST_TEST_THREADS=${RUST_TEST_THREADS:-8}
export RUST_TEST_THREADS
if [ -z "${CHIPSET_PEER_FIXTURES:-}" ] && [ -d ../shared/fixtures/peers ]; then
    CHIPSET_PEER_FIXTURES=$(cd ../shared/fixtures/peers && pwd)
    export CHIPSET_PEER_FIXTURES
fi
out=${MUTANTS_STATE:-mutants.out-state}/$scope
mkdir -p "$out"
iterate=
if [ -z "$fresh" ] && [ -f "$out/mutants.out/outcomes.json" ]; then
    iterate=--iterate
fi
echo "mutants: scope $scope, results in $out/mutants.out ${iterate:+(continuing: --iterate)}"
status=0
# shellcheck disable=SC2086 # $files and $iterate are word lists on purpose
cargo mutants -p "$crate" $files -j "$jobs" --output "$out" $iterate "$@" || status=$?
# cargo mutants exits 2 when a mutant was missed, 3 on a timeout: not errors
# of this script. 1 (usage) and 4 (baseline failed) are.
case $status in 0|2|3) ;; *) exit "$status" ;; esac
count() { if [ -f "$out/mutants.out/$1.txt" ]; then wc -l < "$out/mutants.out/$1.txt"; else echo 0; fi; }
caught=$(count caught) missed=$(count missed) timeout=$(count timeout) unviable=$(count unviable)
tested=$((caught + missed + timeout))
if [ "$tested" -gt 0 ]; then score="$((100 * caught / tested))%"; else score=-; fi
printf '%s: caught %s, missed %s, timeout %s, unviable %s, score %s (this run)\n' \
    "$scope" "$caught" "$missed" "$timeout" "$unviable" "$score"
if [ "$missed" -gt 0 ]; then
    echo "missed:"
    sed 's/^/  /' "$out/mutants.out/missed.txt"
fi
