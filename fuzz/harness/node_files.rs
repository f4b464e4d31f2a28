//! A formatted node's own files: `meta.properties` (`corum_node::MetaProperties::parse`) and
//! the bootstrap checkpoint `corum format` writes (`corum_node::BootstrapCheckpoint::decode`).
//!
//! The first byte picks the file (even: meta.properties, whose text is the rest, lossily made
//! UTF-8 as the node reads text; odd: the checkpoint's bytes). Either fails with an error
//! naming the file, or decodes to a value that survives a round trip through the file's
//! writer (`MetaProperties::to_text`, `BootstrapCheckpoint::encode`, which panics on a value
//! that does not validate, so a decoded checkpoint must validate).

use std::path::Path;

use corum_controller::control::feature_control::BootstrapFeature;
use corum_node::{BootstrapCheckpoint, BootstrapEndpoint, BootstrapVoter, MetaProperties};
use corum_types::{NodeId, Uuid};

fn path() -> &'static Path {
    Path::new("/data/meta.properties")
}

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector % 2 == 0 {
        let text = String::from_utf8_lossy(rest);
        match MetaProperties::parse(&text, path()) {
            Ok(meta) => {
                let again = MetaProperties::parse(&meta.to_text(), path())
                    .expect("written meta.properties parses");
                assert_eq!(again, meta, "meta.properties survives a round trip");
            }
            Err(e) => assert!(e.to_string().contains("meta.properties")),
        }
    } else {
        match BootstrapCheckpoint::decode(rest, path()) {
            Ok(checkpoint) => {
                checkpoint
                    .validate()
                    .expect("a decoded checkpoint validates");
                let again = BootstrapCheckpoint::decode(&checkpoint.encode(), path())
                    .expect("an encoded checkpoint decodes");
                assert_eq!(again, checkpoint, "a checkpoint survives a round trip");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

/// Seeds: meta.properties as `corum format` writes it and with comments, blank lines,
/// continuations and an unknown key; checkpoints of one and three voters, and a damaged one.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let with = |selector: u8, bytes: &[u8]| {
        let mut out = vec![selector];
        out.extend_from_slice(bytes);
        out
    };
    let meta = MetaProperties {
        cluster_id: Uuid([0x2a; 16]),
        node_id: NodeId(1),
        directory_id: Uuid([0x11; 16]),
    };
    let mut seeds = vec![
        ("meta".to_owned(), with(0, meta.to_text().as_bytes())),
        (
            "meta-spelled".to_owned(),
            with(
                0,
                format!(
                    "! comment\n\n  version = 1\ncluster.id:{}\nnode.id \\\n  1\ndirectory.id={}\n",
                    meta.cluster_id, meta.directory_id
                )
                .as_bytes(),
            ),
        ),
        (
            "meta-unknown-key".to_owned(),
            with(0, format!("{}log.dirs=/x\n", meta.to_text()).as_bytes()),
        ),
    ];
    let voter = |id: u32| BootstrapVoter {
        id: NodeId(id),
        directory_id: Uuid([id as u8; 16]),
        endpoints: vec![BootstrapEndpoint {
            name: "CONTROLLER".into(),
            host: format!("controller-{id}"),
            port: 9093,
        }],
    };
    let features = vec![BootstrapFeature {
        name: "metadata.version".into(),
        level: 27,
    }];
    for (name, voters) in [
        ("one-voter", vec![voter(1)]),
        ("three-voters", vec![voter(1), voter(2), voter(3)]),
    ] {
        let c = BootstrapCheckpoint {
            kraft_version: 1,
            voters,
            features: features.clone(),
        };
        seeds.push((format!("checkpoint-{name}"), with(1, &c.encode())));
    }
    let c = BootstrapCheckpoint {
        kraft_version: 0,
        voters: vec![],
        features,
    };
    seeds.push(("checkpoint-static".to_owned(), with(1, &c.encode())));
    let mut bad = c.encode();
    let at = bad.len() - 6;
    bad[at] ^= 0x10;
    seeds.push(("checkpoint-bad-checksum".to_owned(), with(1, &bad)));
    seeds
}
