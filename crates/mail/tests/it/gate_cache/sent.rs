//! The sent journal (`mail/.gate/sent/`): a gate right after the sends
//! takes what the senders recorded instead of reading their files back,
//! and reads every file no record vouches for (issue 31).

use super::*;

/// `mail/.gate/sent/{to}.jsonl`: the journal of `to`'s inbox.
fn journal(mail: &Mail, to: &str) -> PathBuf {
    mail.dir()
        .join_static(".gate")
        .join("sent")
        .unwrap()
        .join(format!("{to}.jsonl"))
        .unwrap()
        .into_path_buf()
}

/// `n` requests for `t1` from `critic` to `exec`, the first one sent
/// alone and the rest as one batch; their file names, sorted.
fn requests(mail: &Mail, n: usize) -> Vec<String> {
    let draft = |i: usize| {
        NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "why",
            format!("question {i}"),
        )
    };
    let mut sent = vec![mail.send(&draft(0)).unwrap()];
    let drafts: Vec<NewMessage> = (1..n).map(draft).collect();
    sent.extend(mail.send_batch(&drafts).unwrap());
    let mut names: Vec<String> = sent.iter().map(|m| format!("{}.json", m.id)).collect();
    names.sort();
    names
}

fn pending_names(mail: &Mail) -> Vec<String> {
    pending_ids(mail)
        .iter()
        .map(|id| format!("{id}.json"))
        .collect()
}

/// Right after the sends (the inbox's stamp inside the racy window) the
/// gate opens none of the files its senders recorded, and returns the
/// same requests as reading them would (issue 31: it read every one).
#[test]
fn a_gate_right_after_the_sends_opens_no_file_its_senders_recorded() {
    let f = fixture();
    let m = &f.mail;
    let sent = requests(m, 5);
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    let pending = m.pending_replies(&task("t1")).unwrap();
    assert_eq!(opened(&exec), Vec::<String>::new());
    assert_eq!(pending_names(m), sent);
    // The same messages, field for field, as a listing of the files gives.
    let listed = m.inbox(&agent("exec")).unwrap();
    let mut listed: Vec<_> = listed.into_iter().collect();
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(pending, listed);
}

/// A request another program wrote into the inbox in the racy window has
/// no record: the gate reads it (and only it) and keeps it pending.
#[test]
fn a_foreign_request_in_the_racy_window_is_read_and_counted() {
    let f = fixture();
    let m = &f.mail;
    let mut want = requests(m, 3);
    let (foreign_id, _) = nubos_request(m, "exec", 1);
    let foreign_name = format!("{foreign_id}.json");
    want.push(foreign_name.clone());
    want.sort();
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(pending_names(m), want);
    assert_eq!(opened(&exec), vec![foreign_name]);
}

/// A send that died between its publish and its record leaves the file
/// with no record, or with a torn last line: the gate reads those files
/// and counts them.
#[test]
fn a_send_that_died_before_its_record_is_read_and_counted() {
    let f = fixture();
    let m = &f.mail;
    let sent = requests(m, 4);
    let path = journal(m, "exec");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "one record per message sent");
    // The last record torn half way, the one before it never written.
    let torn = &lines[3][..lines[3].len() / 2];
    let kept = format!("{}\n{}\n{torn}", lines[0], lines[1]);
    std::fs::write(&path, kept).unwrap();
    let missing: Vec<String> = [lines[2], lines[3]]
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["name"].as_str().unwrap().to_owned()
        })
        .collect();
    // One more request published the way a send publishes it, with no record.
    let q = NewMessage::request(agent("critic"), agent("exec"), task("t1"), "why", "late");
    let unrecorded = m.send(&q).unwrap();
    let unrecorded_name = format!("{}.json", unrecorded.id);
    let text = std::fs::read_to_string(&path).unwrap();
    let without: String = text
        .split_inclusive('\n')
        .filter(|l| !l.contains(unrecorded.id.as_str()))
        .collect();
    std::fs::write(&path, without).unwrap();

    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    let mut want = sent.clone();
    want.push(unrecorded_name.clone());
    want.sort();
    assert_eq!(pending_names(m), want);
    let mut read = missing;
    read.push(unrecorded_name);
    read.sort();
    assert_eq!(opened(&exec), read);
}

/// A record whose file left the inbox is not used; a record whose name
/// now holds another file is not either: the file is read, and a broken
/// one keeps the gate closed.
#[test]
fn a_record_whose_file_is_gone_or_replaced_is_never_used() {
    let f = fixture();
    let m = &f.mail;
    let sent = requests(m, 3);
    let inbox = m.inbox_dir(&agent("exec")).into_path_buf();
    // Moved out by another program (no archive event, no response).
    let away = f.tmp.scratch("away");
    std::fs::create_dir_all(&away).unwrap();
    std::fs::rename(inbox.join(&sent[0]), away.join(&sent[0])).unwrap();
    assert_eq!(pending_names(m), sent[1..].to_vec());
    // Replaced under its name by another program's file of another task.
    let other = std::fs::read_to_string(inbox.join(&sent[1]))
        .unwrap()
        .replace("\"t1\"", "\"t9\"");
    let tmp = inbox.join(".replacing");
    std::fs::write(&tmp, other).unwrap();
    std::fs::rename(&tmp, inbox.join(&sent[1])).unwrap();
    assert_eq!(pending_names(m), sent[2..].to_vec());
    // Rewritten in place with bytes that are not a message: fails closed.
    std::fs::write(inbox.join(&sent[2]), "{not json").unwrap();
    match m.pending_replies(&task("t1")) {
        Err(chipset_mail::Error::Corrupt(c)) => {
            assert!(c.path.ends_with(&sent[2]), "{c:?}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// Once the inbox settled, a gate lists it into the folder cache and
/// empties the journal; the next gates take every file from the cache.
#[test]
fn a_settled_listing_empties_the_journal_and_keeps_the_gate() {
    let f = fixture();
    let m = &f.mail;
    let sent = requests(m, 3);
    let path = journal(m, "exec");
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
    settle();
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(pending_names(m), sent);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "");
    assert_eq!(pending_names(m), sent);
    assert_eq!(opened(&exec), Vec::<String>::new());
}
