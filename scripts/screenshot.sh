#!/usr/bin/env bash
# Refreshes the pictures of the live views in docs/images/:
# - dashboard.png: the browser test's page (`chipset serve` over the peer
#   fixtures, headless chromium), saved by the test itself;
# - top.txt and top-pool.txt: one frame of `chipset top` over a small
#   demo team, on the agents view and on the work pool's.
# Needs chromium and chromium-driver (apt-get install chromium chromium-driver).
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/images
mkdir -p "$out"

CHIPSET_DASHBOARD_SCREENSHOT="$PWD/$out/dashboard.png" \
    cargo test -q -p chipset-cli --test it -- dashboard:: --exact \
    dashboard::the_dashboard_shows_a_fixture_state_and_a_new_message_live

cargo build -q -p chipset-cli
chipset="$PWD/target/debug/chipset"
demo=$(mktemp -d)
trap 'rm -rf "$demo"' EXIT
c() { "$chipset" --root "$demo/state" "$@" >/dev/null; }
c init
c agent register polecat-alpha --roles worker
c agent register polecat-beta --roles worker
c hook assign polecat-alpha --bead bd-101 --title "Fix the parser" --by mayor
c hook activate polecat-alpha
c hook assign polecat-beta --bead bd-102 --title "Bump dependencies" --by mayor
c mail send --from critic --to polecat-alpha --kind request --task T-7 \
    --subject review-parser --body "The error path drops the span."
c bus publish --to polecat-alpha --source witness --kind health-check --priority critical
c bus publish --to polecat-beta --source mayor --kind work-assigned
c nudge send --from witness --to polecat-alpha --type stall_warning --message "are you there?"
c remind open --kind wip_unsealed --source-type wip_state --source-id wip-7 \
    --message "Seal the parser WIP" --agent polecat-alpha
c lease acquire --agent polecat-alpha --reason "rewrite the parser" "src/parser/**"
c work post --agent mayor --id w-changelog --priority 1 --label docs "Write the changelog" \
    --body "One line per change since 0.1, in Keep a Changelog form."
c work post --agent mayor --id w-release --depends-on w-changelog "Release 0.2"
c work post --agent mayor --id w-keys --defer 48h "Rotate the signing keys"
c work post --agent mayor --id w-ci --priority 0 "Fix the flaky CI job"
c work claim --agent polecat-gamma w-ci
frame() {
    "$chipset" --root "$demo/state" top --once 120x30 "$@" | sed "s|$demo|/project/.chipset|"
}
frame > "$out/top.txt"
frame --view pool > "$out/top-pool.txt"
echo "refreshed $out/dashboard.png, $out/top.txt and $out/top-pool.txt"
