//! Files the seed's other programs wrote (`shared/fixtures/peers/`):
//! nubos-pilot's messages and manifest, Tibsfox's camelCase hooks.

use chipset_mail::{Mail, MailConfig, NewMessage};
use chipset_search::{Origin, Query, SearchIndex};
use chipset_store::StateDir;
use chipset_testkit::TempState;

#[test]
fn nubos_messages_and_tibsfox_hooks_are_found() {
    let peers = chipset_testkit::peer_fixtures();
    let tmp = TempState::new();
    chipset_testkit::copy_dir(
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

/// The index holds one mail store's messages: searched with a nubos-pilot
/// folder as its mail, it finds the folder's and not the root's own; back
/// on the root's, the other way round.
#[test]
fn the_index_follows_the_mail_folder_it_is_given() {
    let tmp = TempState::new();
    let project = tmp.state.root().parent().unwrap().join("project");
    let folder = chipset_testkit::nubos_messages(&project);
    let own = Mail::new(tmp.state.clone());
    let note = NewMessage::notify(
        "mayor".parse().unwrap(),
        "polecat-alpha".parse().unwrap(),
        "gt-1".parse().unwrap(),
        "zebrafish",
        "only under the root",
    );
    own.send(&note).unwrap();
    // Found by its inbox alone (as a message of a writer that keeps no
    // manifest), whose stamp must then not outlive a move of the index.
    std::fs::remove_file(tmp.state.root().join("mail/manifest.jsonl")).unwrap();
    // Every folder's stamp settled (a young one is never trusted, and
    // would hide a stamp kept by mistake).
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let folder_mail = Mail::in_folder(StateDir::open(&folder).unwrap(), MailConfig::default());
    let count =
        |search: &SearchIndex, words: &str| search.search(&Query::new(words)).unwrap().len();

    let root = SearchIndex::new(tmp.state.clone());
    assert_eq!(
        (count(&root, "zebrafish"), count(&root, "foobarservice")),
        (1, 0)
    );
    let shared = SearchIndex::new(tmp.state.clone()).with_mail(folder_mail);
    assert_eq!(
        (count(&shared, "zebrafish"), count(&shared, "foobarservice")),
        (0, 1)
    );
    let root = SearchIndex::new(tmp.state.clone());
    assert_eq!(
        (count(&root, "zebrafish"), count(&root, "foobarservice")),
        (1, 0)
    );
}
