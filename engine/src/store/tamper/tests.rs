use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use crate::store::{RunHandle, RunStore};

fn new_run(repo: &Path) -> RunHandle {
    RunStore::new(repo)
        .create(crate::redact::Redactor::default())
        .unwrap()
}

fn said(run: &RunHandle) -> Vec<String> {
    run.changed_records()
        .iter()
        .map(std::string::ToString::to_string)
        .collect()
}

/// What the check says of a record whose content is not what was announced.
fn changed(rel: &str) -> String {
    format!("the run record `{rel}` changed after specbridge wrote it")
}

/// Writes `bytes` over the start of the file in place: same inode, same size.
fn overwrite_in_place(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(bytes).unwrap();
}

/// Longer than the settling time the tests give, and than a clock tick.
fn past_settling() {
    std::thread::sleep(Duration::from_millis(60));
}

#[test]
fn a_changed_deleted_record_or_an_edited_log_is_named() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    run.write_json("stages/a/stage.json", &serde_json::json!({"x": 1}))
        .unwrap();
    // Rewritten by specbridge: the last announcement counts.
    run.write_json("stages/a/stage.json", &serde_json::json!({"x": 2}))
        .unwrap();
    assert_eq!(run.changed_records(), []);

    std::fs::write(run.dir().join("pipeline.yaml"), b"name: b\n").unwrap();
    std::fs::remove_file(run.dir().join("stages/a/stage.json")).unwrap();
    assert_eq!(
        said(&run),
        [
            changed("pipeline.yaml"),
            "the run record `stages/a/stage.json` was deleted after specbridge wrote it"
                .to_string(),
        ]
    );

    let events = run.dir().join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    text.push_str("{\"seq\":99}\n");
    std::fs::write(&events, text).unwrap();
    let changes = run.changed_records();
    assert_eq!(changes[0].path, "events.jsonl", "{changes:?}");
}

/// A record found as announced, and settled, is not hashed again while its
/// stat data stays; an edit in place that keeps its size still changes its
/// change time, and is found.
#[test]
fn an_edit_in_place_of_a_record_checked_before_is_found() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.settle_records_after(Duration::from_millis(20));
    run.write_bytes("stages/a/stage.json", b"{\"status\":\"ok\"}\n")
        .unwrap();
    past_settling();
    assert_eq!(run.changed_records(), [], "found as announced, settled");
    assert_eq!(run.changed_records(), [], "again, from its stat data");

    past_settling();
    let path = run.dir().join("stages/a/stage.json");
    overwrite_in_place(&path, b"{\"status\":\"no\"}\n");
    assert_eq!(said(&run), [changed("stages/a/stage.json")]);
    // Put back as it was: the content is what was announced again.
    overwrite_in_place(&path, b"{\"status\":\"ok\"}\n");
    assert_eq!(run.changed_records(), []);
}

/// With the settling times a run has: on this file system's own precision
/// (a fine one trusts the stat data after 100 ms, a coarse one after five
/// seconds), an edit in place after the record settled is found.
#[test]
fn an_edit_in_place_after_the_default_settling_is_found() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.write_bytes("stages/a/stage.json", b"{\"status\":\"ok\"}\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(run.changed_records(), [], "found as announced");
    assert_eq!(run.changed_records(), [], "again");
    let path = run.dir().join("stages/a/stage.json");
    overwrite_in_place(&path, b"{\"status\":\"no\"}\n");
    assert_eq!(said(&run), [changed("stages/a/stage.json")]);
}

/// Records are asked folder by folder: a record at the top of the run, and
/// records whose folder went or was put back as a copy, are each answered
/// for.
#[test]
fn records_in_a_folder_that_went_or_came_back_as_a_copy_are_answered_for() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.settle_records_after(Duration::from_millis(20));
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    run.write_bytes("stages/a/stage.json", b"{}\n").unwrap();
    run.write_bytes("stages/a/attempt-001/result.json", b"{}\n")
        .unwrap();
    run.write_bytes("stages/b/stage.json", b"{}\n").unwrap();
    past_settling();
    assert_eq!(run.changed_records(), [], "found as announced");
    assert_eq!(run.changed_records(), [], "again, from their stat data");

    // `a` moved aside and put back as a copy: other inodes, the same bytes.
    let a = run.dir().join("stages/a");
    let aside = repo.path().join("a-aside");
    std::fs::rename(&a, &aside).unwrap();
    std::fs::create_dir_all(a.join("attempt-001")).unwrap();
    std::fs::copy(aside.join("stage.json"), a.join("stage.json")).unwrap();
    std::fs::write(a.join("attempt-001/result.json"), b"{\"x\":1}\n").unwrap();
    std::fs::remove_dir_all(run.dir().join("stages/b")).unwrap();
    overwrite_in_place(&run.dir().join("pipeline.yaml"), b"name: b\n");
    assert_eq!(
        said(&run),
        [
            changed("pipeline.yaml"),
            changed("stages/a/attempt-001/result.json"),
            "the run record `stages/b/stage.json` was deleted after specbridge wrote it"
                .to_string(),
        ]
    );
}

/// A file has one change time whatever name it is written through.
#[test]
fn an_edit_through_a_hard_link_is_found() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.settle_records_after(Duration::from_millis(20));
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    let elsewhere = repo.path().join("link.yaml");
    std::fs::hard_link(run.dir().join("pipeline.yaml"), &elsewhere).unwrap();
    past_settling();
    assert_eq!(run.changed_records(), []);

    past_settling();
    overwrite_in_place(&elsewhere, b"name: b\n");
    assert_eq!(said(&run), [changed("pipeline.yaml")]);
}

/// While its change time is recent, a record is hashed every time: an edit
/// within the same clock tick as the check before it would leave its stat
/// data as it was.
#[test]
fn a_record_edited_right_after_a_check_is_found() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.settle_records_after(Duration::from_secs(3600));
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    assert_eq!(run.changed_records(), []);
    overwrite_in_place(&run.dir().join("pipeline.yaml"), b"name: b\n");
    assert_eq!(said(&run), [changed("pipeline.yaml")]);
}

/// A record put in another's place is another inode, whatever its times; and
/// a record specbridge writes again is checked against its new announcement.
#[test]
fn a_record_replaced_or_written_again_is_checked_against_its_last_announcement() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.settle_records_after(Duration::from_millis(20));
    run.write_json("stages/a/stage.json", &serde_json::json!({"x": 1}))
        .unwrap();
    past_settling();
    assert_eq!(run.changed_records(), []);

    run.write_json("stages/a/stage.json", &serde_json::json!({"x": 2}))
        .unwrap();
    assert_eq!(run.changed_records(), [], "the new announcement counts");
    past_settling();
    assert_eq!(run.changed_records(), [], "and settles");

    let path = run.dir().join("stages/a/stage.json");
    let before = std::fs::read(&path).unwrap();
    let other = repo.path().join("other.json");
    std::fs::write(&other, String::from_utf8(before).unwrap().replace('2', "3")).unwrap();
    std::fs::rename(&other, &path).unwrap();
    assert_eq!(said(&run), [changed("stages/a/stage.json")]);
}

/// Records announced after a check, and those of a run continued by another
/// handle (a resume), are checked like the first ones.
#[test]
fn records_announced_later_or_by_an_earlier_process_are_checked() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    assert_eq!(run.changed_records(), []);
    run.write_bytes("stages/b/stage.json", b"{}\n").unwrap();
    std::fs::write(run.dir().join("stages/b/stage.json"), b"{\"x\":1}\n").unwrap();
    assert_eq!(said(&run), [changed("stages/b/stage.json")]);

    let id = run.id().to_string();
    drop(run);
    let run = RunStore::new(repo.path())
        .open(&id, crate::redact::Redactor::default())
        .unwrap();
    std::fs::write(run.dir().join("pipeline.yaml"), b"name: c\n").unwrap();
    assert_eq!(
        said(&run),
        [changed("pipeline.yaml"), changed("stages/b/stage.json"),]
    );
}

/// The log is compared byte for byte with what was written: a line edited
/// to the same length, and bytes added after the last line, are named.
#[test]
fn an_edited_or_extended_log_is_named() {
    let repo = tempfile::tempdir().unwrap();
    let run = new_run(repo.path());
    run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
    assert_eq!(run.changed_records(), []);
    let events = run.dir().join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();

    let edited = text.replacen("pipeline.yaml", "pipeline.yml!", 1);
    assert_eq!(edited.len(), text.len());
    std::fs::write(&events, &edited).unwrap();
    let edits = said(&run);
    assert!(
        edits[0].starts_with("the run record `events.jsonl` was edited (line"),
        "{edits:?}"
    );

    std::fs::write(&events, format!("{text}x")).unwrap();
    assert_eq!(
        said(&run),
        ["the run record `events.jsonl` was edited: its bytes are not those written"]
    );
}

/// A change time counts as settled only once the settling time has passed
/// since it: on a file system whose timestamps are coarser than the time
/// between a check and an edit, the edit could leave the stat data as it was.
/// Which settling time, the change time's own precision says.
#[test]
fn a_change_time_settles_after_the_settling_time_its_precision_asks() {
    use std::time::{SystemTime, UNIX_EPOCH};
    let now = SystemTime::now();
    let since = now.duration_since(UNIX_EPOCH).unwrap();
    // A change time `ago` before now, as a file system of precision `unit`
    // (in nanoseconds) stamps it: 1 for one that keeps nanoseconds (made odd,
    // so that it is no whole millisecond), a million for milliseconds, a
    // billion for seconds.
    let stamp = |ago: Duration, unit: u32| {
        let t = since - ago;
        let nanos = t.subsec_nanos();
        let nanos = if unit == 1 {
            nanos | 1
        } else {
            nanos - nanos % unit
        };
        super::Stamp {
            dev: 1,
            ino: 2,
            len: 3,
            mtime: (0, 0),
            ctime: (t.as_secs() as i64, i64::from(nanos)),
        }
    };
    let (fine, ms, s) = (1, 1_000_000, 1_000_000_000);
    let ago = Duration::from_millis;
    let settle = super::Settle::default();
    // Finer than a millisecond: 100 ms.
    assert!(!stamp(ago(0), fine).settled(now, settle));
    assert!(!stamp(ago(95), fine).settled(now, settle));
    assert!(stamp(ago(105), fine).settled(now, settle));
    // Whole milliseconds or seconds (perhaps a coarse file system): 5 s.
    for unit in [ms, s] {
        assert!(!stamp(ago(105), unit).settled(now, settle));
        assert!(!stamp(ago(3_900), unit).settled(now, settle));
        assert!(stamp(ago(6_100), unit).settled(now, settle));
    }
    // One settling time whatever the precision, as the other tests set it.
    let always = super::Settle::always(Duration::from_secs(5));
    assert!(!stamp(ago(105), fine).settled(now, always));
    assert!(!stamp(ago(4_900), fine).settled(now, always));
    assert!(stamp(ago(5_100), fine).settled(now, always));
    // A change time after the clock's now (a clock stepped back) is not.
    let ahead = since + Duration::from_secs(60);
    let future = super::Stamp {
        ctime: (ahead.as_secs() as i64, 7),
        ..stamp(ago(0), fine)
    };
    assert!(!future.settled(now, settle));
    assert!(!future.settled(now, always));
}
