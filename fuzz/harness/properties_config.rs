//! The node's configuration file: Kafka's properties format (`parse_properties`), the node
//! configuration built from it (`NodeConfig::load`, every key's value parsed and the whole
//! validated) and the structured values' parsers on their own (`parse_listeners`,
//! `parse_voters`, `parse_roles`, `parse_protocol_map`).
//!
//! The input is the file's text (made UTF-8 lossily, as a node reads it). Each step either
//! fails with an error or succeeds; the entries `parse_properties` finds survive a round trip
//! through `escape_value` (each written back as `key=escaped value` reads back to the same key
//! and value) whenever the key needs no escaping itself.

use corum_node::config::values::{parse_listeners, parse_protocol_map, parse_roles, parse_voters};
use corum_node::config::{escape_value, parse_properties};
use corum_node::NodeConfig;

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(entries) = parse_properties(&text) {
        for e in &entries {
            let _ = parse_listeners(&e.value).map_err(|e| e.to_string());
            let _ = parse_voters(&e.value).map_err(|e| e.to_string());
            let _ = parse_roles(&e.value).map_err(|e| e.to_string());
            let _ = parse_protocol_map(&e.value).map_err(|e| e.to_string());
            let plain_key = !e.key.is_empty()
                && e.key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if plain_key {
                let line = format!("{}={}\n", e.key, escape_value(&e.value));
                let back = parse_properties(&line).expect("an escaped entry parses");
                assert_eq!(back.len(), 1, "one entry from {line:?}");
                assert_eq!(back[0].key, e.key);
                assert_eq!(
                    back[0].value, e.value,
                    "the value survives escaping: {line:?}"
                );
            }
        }
    }
    if let Err(e) = NodeConfig::load(Some(&text), &[]) {
        assert!(!e.to_string().is_empty());
    }
}

/// Seeds: a combined broker and controller's file, a controller of a dynamic quorum, and
/// files with escapes, continuations and mistakes.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let files = [
        (
            "controller",
            "process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@controller-1:9093,2@controller-2:9093,3@controller-3:9093\nlisteners=CONTROLLER://0.0.0.0:9093,CLIENT://0.0.0.0:9094\ncontroller.listener.names=CONTROLLER\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT\nmetadata.log.dir=/var/lib/corum\n",
        ),
        (
            "dynamic-quorum",
            "# a controller joining a dynamic quorum\nprocess.roles = controller\nnode.id : 4\ncontroller.quorum.bootstrap.servers=controller-1:9093,controller-2:9093\nlisteners=CONTROLLER://[::1]:9093\ncontroller.listener.names=CONTROLLER\nmetadata.log.dir=/data\n",
        ),
        (
            "escapes",
            "! comment\nmetadata.log.dir=/data/with\\ space\\u0041\\\n    continued\nnode.id\t2\nlisteners=CONTROLLER://h\\:9093\n",
        ),
        ("mistakes", "node.id=x\nnode.id=1\nunknown.key=1\n=novalue\nprocess.roles=broker,broker\n"),
        ("bad-escape", "listeners=\\u12\nnode.id=\\uD800\n"),
    ];
    files
        .into_iter()
        .map(|(name, text)| (name.to_owned(), text.as_bytes().to_vec()))
        .collect()
}
