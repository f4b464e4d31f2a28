//! Fuzz target `raft_message`: the harness `fuzz/harness/raft_message.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets raft_message [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/raft_message.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
