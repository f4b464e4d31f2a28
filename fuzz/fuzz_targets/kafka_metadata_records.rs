//! Fuzz target `kafka_metadata_records`: the harness `fuzz/harness/kafka_metadata_records.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets kafka_metadata_records [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/kafka_metadata_records.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
