//! Fuzzes the Kafka listener's framing and dispatch: the input is the bytes a client sends on
//! one connection (one or more size-prefixed requests), served as the node's listener serves
//! them by the harness shared with the stable replay test (`kafka/tests/fuzz_harness`; read
//! its module doc for what it checks and how the input picks the backend's faults).
//!
//! Run it with `tools/scripts/fuzz.sh --targets kafka_listener [SECONDS]`.

#![no_main]

use std::collections::HashSet;
use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;

#[path = "../../kafka/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

/// The node's allocator: a lying array length must fail the decode, not abort the process.
#[global_allocator]
static ALLOC: corum_kafka::alloc::NoReserveLarge = corum_kafka::alloc::NoReserveLarge;

/// Where the codec panicked inside `corum_kafka::parse`, which catches those panics and
/// closes the connection: each place is printed once, for the report.
static CAUGHT: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fuzz_target!(
    init: {
        // libFuzzer's hook aborts on every panic; a panic inside the request decoders is
        // caught by `parse` (a node closes that connection), so only note where it was.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if fuzz_harness::in_request_decoder() {
                let place = info
                    .location()
                    .map_or_else(|| "(unknown)".to_owned(), |l| l.to_string());
                let mut caught = CAUGHT.lock().unwrap_or_else(|e| e.into_inner());
                if caught.get_or_insert_with(HashSet::new).insert(place.clone()) {
                    eprintln!("caught by corum_kafka::parse: a decoder panic at {place}: {info}");
                }
            } else {
                abort(info);
            }
        }));
    },
    |data: &[u8]| {
        fuzz_harness::connection(data);
    }
);
