#!/usr/bin/env bash
# Counts each library crate's public surface two ways: the entries of
# rustdoc's item list (target/doc/CRATE/all.html; run
# `cargo doc --workspace --no-deps` first) and the `pub` declarations in
# its sources. rustdoc's list also has one heading entry per kind of item
# (structs, enums, ...): `entries` counts them, as issue 27 did, and
# `items` does not. A workspace build unifies features, so it counts the
# store's `testing` seam (4 items, for chipset-testkit) and loop's `tokio`
# stream (1); `cargo doc --no-deps -p chipset-CRATE` counts a crate with
# its default features, as a user who adds it sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
printf '%-8s %8s %6s %10s\n' crate entries items pub-decls
for c in store hook nudge mail bus loop; do
    html="target/doc/chipset_$c/all.html"
    entries=$(grep -o '<li><a href="[^"]*"' "$html" | wc -l)
    items=$(grep -o '<li><a href="[^#"][^"]*"' "$html" | wc -l)
    decls=$(grep -rE '^\s*pub (fn|struct|enum|trait|type|const|mod|use)' "crates/$c/src" | wc -l)
    printf '%-8s %8s %6s %10s\n' "$c" "$entries" "$items" "$decls"
done
