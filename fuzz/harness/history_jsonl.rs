//! The checker's history files (`corum_check::history::History::parse`): JSON lines that a
//! chaos run or a user hands to `corum check-history`.
//!
//! The input is the file's text (lossily UTF-8). It either fails with an error naming the
//! line, or parses to a history that `to_json_lines` writes out as text which parses again and
//! writes out identically.

use corum_check::history::History;

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match History::parse(&text) {
        Ok(history) => {
            let written = history.to_json_lines();
            let again = History::parse(&written).expect("a written history parses");
            assert_eq!(
                again.to_json_lines(),
                written,
                "a history survives a round trip"
            );
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Seeds: the example history of `corum_check::history`'s documentation, each of its lines
/// alone, and broken lines.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let doc = include_str!("../../check/src/history.rs");
    let lines: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("//! {"))
        .map(|l| format!("{{{l}\n"))
        .collect();
    let mut seeds = vec![("doc".to_owned(), lines.concat().into_bytes())];
    for (i, l) in lines.iter().enumerate() {
        seeds.push((format!("line-{i}"), l.clone().into_bytes()));
    }
    seeds.push(("not-json".to_owned(), b"{\"type\":\n".to_vec()));
    seeds.push(("blank".to_owned(), b"\n   \n".to_vec()));
    seeds
}
