//! Files the seed's other programs wrote (`shared/fixtures/peers/`):
//! nubos-pilot's messages and manifest, Tibsfox's camelCase hooks.

use std::path::Path;

use chipset_search::{Origin, Query, SearchIndex};
use chipset_testkit::TempState;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn nubos_messages_and_tibsfox_hooks_are_found() {
    let peers = chipset_testkit::peer_fixtures();
    let tmp = TempState::new();
    copy_dir(
        &peers.join("nubos-pilot/messages"),
        &tmp.state.root().join("mail"),
    );
    // Tibsfox names its files by state; give each an agent's name.
    let hooks = tmp.state.root().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::copy(
        peers.join("tibsfox/hooks/active.json"),
        hooks.join("polecat-alpha.json"),
    )
    .unwrap();
    let search = SearchIndex::new(tmp.state.clone());
    // In an inbox (round null), named by nubos's manifest.
    let open = search.search(&Query::new("foobarservice")).unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].from.as_deref(), Some("np-critic"));
    assert_eq!(open[0].kind.as_deref(), Some("request"));
    // The answered request (archived) and its response (in an inbox).
    let thread = search.search(&Query::new("test parse")).unwrap();
    let kinds: Vec<_> = thread.iter().filter_map(|h| h.kind.as_deref()).collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&"request") && kinds.contains(&"response"));
    let archived = search
        .search(&Query::new("round begins").kind("notify"))
        .unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].task.as_deref(), Some("M005-S007-T0002"));
    let all = search.search(&Query::new("*").limit(100));
    assert!(all.is_err(), "a lone star has no words");
    let hook = search
        .search(&Query::new("readme").channel(Origin::Hook))
        .unwrap();
    assert_eq!(hook.len(), 1);
    assert_eq!(hook[0].id, "polecat-alpha");
    assert_eq!(hook[0].kind.as_deref(), Some("active"));
    // The work item's `description`, a field chipset does not write, is searched too.
    assert_eq!(search.search(&Query::new("paragraph")).unwrap().len(), 1);
}
