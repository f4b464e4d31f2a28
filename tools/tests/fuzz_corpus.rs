//! Replays the checked-in corpora of the fuzz targets (`fuzz/`) on stable, and checks the
//! generated seeds are current.
//!
//! Each target's harness (`fuzz/harness/<target>.rs`) is compiled here too: `run` is what the
//! cargo-fuzz target calls with each input, and `seeds` writes the target's generated seeds
//! (`fuzz/corpus/<target>/seed-*`) from the project's own encoders. This test runs every file
//! of `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/` (findings kept as regressions)
//! through `run`, and fails if a generated seed is missing or differs:
//! `CORUM_REWRITE=1 cargo test -p corum-tools --test fuzz_corpus` rewrites them (do it when an
//! encoding changes). The `kafka_listener` target has its own replay, in corum-kafka.

// Each harness declares its own copy of `fuzz/harness/common.rs` (its fuzz target compiles it
// alone); here they are compiled together, so that file is loaded once per harness.
#![allow(clippy::duplicate_mod)]

use std::path::{Path, PathBuf};

#[path = "../../fuzz/harness/client_protocol.rs"]
mod client_protocol;
#[path = "../../fuzz/harness/controller_records.rs"]
mod controller_records;
#[path = "../../fuzz/harness/history_jsonl.rs"]
mod history_jsonl;
#[path = "../../fuzz/harness/kafka_metadata_records.rs"]
mod kafka_metadata_records;
#[path = "../../fuzz/harness/log_frame.rs"]
mod log_frame;
#[path = "../../fuzz/harness/node_files.rs"]
mod node_files;
#[path = "../../fuzz/harness/peer_envelope.rs"]
mod peer_envelope;
#[path = "../../fuzz/harness/properties_config.rs"]
mod properties_config;
#[path = "../../fuzz/harness/quorum_state.rs"]
mod quorum_state;
#[path = "../../fuzz/harness/raft_message.rs"]
mod raft_message;
#[path = "../../fuzz/harness/runtime_frame.rs"]
mod runtime_frame;
#[path = "../../fuzz/harness/snapshot_download.rs"]
mod snapshot_download;
#[path = "../../fuzz/harness/snapshot_file.rs"]
mod snapshot_file;

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        /// Every target: its name, its harness and its generated seeds.
        fn targets() -> Vec<(&'static str, fn(&[u8]), fn() -> Vec<(String, Vec<u8>)>)> {
            vec![$((stringify!($name), $name::run as fn(&[u8]), $name::seeds as fn() -> Vec<(String, Vec<u8>)>)),*]
        }

        $(
            #[test]
            fn $name() {
                replay(stringify!($name), $name::run, $name::seeds);
            }
        )*
    };
}

targets!(
    runtime_frame,
    log_frame,
    raft_message,
    controller_records,
    client_protocol,
    peer_envelope,
    snapshot_file,
    snapshot_download,
    quorum_state,
    node_files,
    properties_config,
    kafka_metadata_records,
    history_jsonl,
);

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Checks (or with `CORUM_REWRITE=1` rewrites) `target`'s generated seeds, then runs every
/// corpus and artifact file through its harness.
fn replay(target: &str, run: fn(&[u8]), seeds: fn() -> Vec<(String, Vec<u8>)>) {
    let corpus = fuzz_dir().join("corpus").join(target);
    let seeds = seeds();
    assert!(!seeds.is_empty(), "{target} has seeds");
    if std::env::var_os("CORUM_REWRITE").is_some() {
        for old in files(&corpus) {
            if old
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            {
                std::fs::remove_file(&old).expect("removing an old seed");
            }
        }
        std::fs::create_dir_all(&corpus).expect("the corpus directory");
        for (name, bytes) in &seeds {
            std::fs::write(corpus.join(format!("seed-{name}")), bytes).expect("writing a seed");
        }
    }
    for (name, bytes) in &seeds {
        let path = corpus.join(format!("seed-{name}"));
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run CORUM_REWRITE=1 cargo test -p corum-tools --test fuzz_corpus",
                path.display()
            )
        });
        assert!(
            on_disk == *bytes,
            "{} is not what the generator writes now; run CORUM_REWRITE=1 cargo test -p corum-tools --test fuzz_corpus",
            path.display()
        );
    }
    let mut replayed = 0;
    for dir in [corpus, fuzz_dir().join("artifacts").join(target)] {
        for file in files(&dir) {
            let bytes = std::fs::read(&file).expect("a corpus file");
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(
                outcome.is_ok(),
                "{} fails {target}'s harness",
                file.display()
            );
            replayed += 1;
        }
    }
    assert!(replayed >= seeds.len());
}

#[test]
fn every_target_is_replayed() {
    // Every cargo-fuzz target but kafka_listener (replayed by corum-kafka) is in `targets!`.
    let mut declared: Vec<String> = std::fs::read_to_string(fuzz_dir().join("Cargo.toml"))
        .expect("fuzz/Cargo.toml")
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "corum-fuzz" && *n != "kafka_listener")
        .map(str::to_owned)
        .collect();
    declared.sort();
    let mut replayed: Vec<String> = targets().iter().map(|(n, _, _)| n.to_string()).collect();
    replayed.sort();
    assert_eq!(declared, replayed);
}
