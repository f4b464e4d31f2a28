//! Kafka's own code judges corum's metadata record codecs: `MetadataRecordCheck`
//! (`kafka/metadata/MetadataRecordCheck.java`, compiled by `compat/install.sh`) decodes every
//! record corum writes with Kafka's `MetadataRecordSerde` (KRaftVersionRecord with its
//! generated class) and writes it back; the bytes must be corum's, byte for byte, and the
//! values Kafka read (its JSON converters' JSON of them) must be the values corum wrote. The
//! bytes catch any difference in layout; the values catch what bytes alone cannot, such as two
//! fields of one type read in each other's place by both sides. Kafka's
//! default record of every type at every version must be corum's `Default` (both ways: the
//! bytes match, and corum decodes Kafka's bytes to its default), and Kafka's list of record
//! types and versions must be corum's. One JVM answers all of it. The test fails (never skips)
//! without `java`, the jars or the compiled check: run `compat/install.sh`.

mod metadata_support;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::{Bytes, BytesMut};
use corum_kafka::metadata::{AnyMetadataRecord, KRaftVersionRecord};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::Value;

use metadata_support::{arbitrary, json, record_versions};

/// Records per record version: enough that each field is seen set, unset, null and not.
const SAMPLES_PER_VERSION: usize = 40;

/// What one line sent to the check expects back.
enum Expect {
    Types(String),
    KraftType(String),
    /// A record corum wrote: Kafka reads these values and writes back the same bytes.
    Same {
        what: String,
        hex: String,
        json: Value,
    },
    /// A record Kafka built from corum's JSON of it and wrote: corum reads the same values
    /// (unknown tagged fields, which JSON does not carry, aside) and writes the same bytes.
    FromJson {
        what: String,
        json: Value,
        /// None for a metadata record, else the KRaftVersionRecord's version.
        kraft_version: Option<i16>,
    },
    /// Kafka's default metadata record: corum's default framed, decoding to it.
    DefaultMetadata {
        api_key: i16,
        version: i16,
    },
    DefaultKraftVersion {
        version: i16,
    },
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in the repository")
        .to_path_buf()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").expect("writing to a String");
        s
    })
}

fn unhex(text: &str) -> Bytes {
    assert!(text.len() % 2 == 0, "odd hex from the check: {text}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex from the check"))
        .collect::<Vec<u8>>()
        .into()
}

fn framed(record: &AnyMetadataRecord, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    record
        .encode_framed(version, &mut buf)
        .unwrap_or_else(|e| panic!("{} v{version} encodes: {e}", record.name()));
    buf.freeze()
}

fn sample<S: Strategy>(runner: &mut TestRunner, strategy: &S) -> S::Value {
    strategy
        .new_tree(runner)
        .expect("the strategies never reject")
        .current()
}

/// The classpath of the compiled check, after checking it is there and not older than its
/// source.
fn classpath(repo: &Path) -> String {
    let jars = repo.join("compat/jars");
    assert!(
        jars.join("kafka-metadata-4.1.2.jar").is_file(),
        "{} has no kafka-metadata-4.1.2.jar: run compat/install.sh",
        jars.display()
    );
    let source = repo.join("kafka/metadata/MetadataRecordCheck.java");
    let class = repo.join("compat/build/classes/MetadataRecordCheck.class");
    let modified = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{}: {e} (run compat/install.sh)", p.display()))
    };
    assert!(
        modified(&class) >= modified(&source),
        "{} is older than {}: run compat/install.sh to compile it again",
        class.display(),
        source.display()
    );
    format!(
        "{}:{}/*",
        repo.join("compat/build/classes").display(),
        jars.display()
    )
}

/// Runs the check over `lines`, one JVM, and returns its answer lines.
fn run_check(repo: &Path, lines: &[String]) -> Vec<String> {
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(classpath(repo))
        .arg("MetadataRecordCheck")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run java ({e}): a JDK 17+ must be on the PATH"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = lines.join("\n") + "\n";
    // Written from another thread: the check answers while it reads, and a full pipe either
    // way would stall both processes.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("the check's output");
    writer
        .join()
        .expect("the writer thread")
        .expect("writing to the check");
    assert!(
        output.status.success(),
        "MetadataRecordCheck failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8 from the check")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Whether Kafka can read the record's JSON back: its JSON converters write an infinite float
/// as a string they do not read.
fn has_json(record: &AnyMetadataRecord) -> bool {
    match record {
        AnyMetadataRecord::ClientQuota(r) => r.value.is_finite(),
        _ => true,
    }
}

/// JSON values equal, floats within an ulp (Java prints a double in the fewest digits that
/// read back as it, and serde_json's fast parser may round the last bit; the bytes compare
/// exactly).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Splits "OK <hex> <json>" into its hex and JSON, or fails with what Kafka said.
fn ok_hex<'a>(answer: &'a str, what: &str) -> (&'a str, &'a str) {
    let Some(rest) = answer.strip_prefix("OK ") else {
        panic!("Kafka refused {what}: {answer}");
    };
    rest.split_once(' ').unwrap_or((rest, ""))
}

#[test]
fn kafka_reads_and_writes_what_corum_does() {
    let repo = repo();
    let mut runner = TestRunner::deterministic();
    let mut lines = Vec::new();
    let mut expects = Vec::new();

    let types = AnyMetadataRecord::TYPES
        .iter()
        .map(|t| {
            format!(
                "{}:{}:{}-{}",
                t.api_key, t.name, t.lowest_version, t.highest_version
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    lines.push("TYPES".to_owned());
    expects.push(Expect::Types(types));
    lines.push("KRAFT_TYPE".to_owned());
    expects.push(Expect::KraftType(format!(
        "{}:{}:{}-{}",
        KRaftVersionRecord::API_KEY,
        KRaftVersionRecord::NAME,
        KRaftVersionRecord::LOWEST_VERSION,
        KRaftVersionRecord::HIGHEST_VERSION
    )));

    let versions = record_versions();
    for &(api_key, version) in &versions {
        lines.push(format!("DM {api_key} {version}"));
        expects.push(Expect::DefaultMetadata { api_key, version });
        let strategy = arbitrary::metadata_record(api_key, version);
        for i in 0..SAMPLES_PER_VERSION {
            let record = sample(&mut runner, &strategy);
            let bytes = framed(&record, version);
            lines.push(format!("M {}", hex(&bytes)));
            let json = json::metadata_record(&record, version);
            expects.push(Expect::Same {
                what: format!("{} v{version} sample {i}", record.name()),
                hex: hex(&bytes),
                json: json.clone(),
            });
            if has_json(&record) {
                lines.push(format!("J {api_key} {version} {json}"));
                expects.push(Expect::FromJson {
                    what: format!("{} v{version} sample {i} from JSON", record.name()),
                    json,
                    kraft_version: None,
                });
            }
        }
    }
    for version in KRaftVersionRecord::LOWEST_VERSION..=KRaftVersionRecord::HIGHEST_VERSION {
        lines.push(format!("DK {version}"));
        expects.push(Expect::DefaultKraftVersion { version });
        let strategy = arbitrary::kraft_version_record(version);
        for i in 0..SAMPLES_PER_VERSION {
            let record = sample(&mut runner, &strategy);
            let mut buf = BytesMut::new();
            record.encode(version, &mut buf).expect("encodes");
            lines.push(format!("K {version} {}", hex(&buf)));
            let json = json::kraft_version_record(&record, version);
            expects.push(Expect::Same {
                what: format!("KRaftVersionRecord v{version} sample {i}"),
                hex: hex(&buf),
                json: json.clone(),
            });
            lines.push(format!("JK {version} {json}"));
            expects.push(Expect::FromJson {
                what: format!("KRaftVersionRecord v{version} sample {i} from JSON"),
                json,
                kraft_version: Some(version),
            });
        }
    }

    let answers = run_check(&repo, &lines);
    assert_eq!(
        answers.len(),
        expects.len(),
        "the check answered {} of {} lines",
        answers.len(),
        expects.len()
    );
    let mut differences = Vec::new();
    let mut same = 0;
    let mut from_json = 0;
    for (answer, expect) in answers.iter().zip(&expects) {
        match expect {
            Expect::Types(ours) | Expect::KraftType(ours) => {
                assert_eq!(
                    answer.strip_prefix("OK "),
                    Some(ours.as_str()),
                    "Kafka's record types and versions (left) differ from corum's (right)"
                );
            }
            Expect::Same { what, hex, json } => {
                let (kafka, kafka_json) = ok_hex(answer, what);
                let read: Value = serde_json::from_str(kafka_json)
                    .unwrap_or_else(|e| panic!("{what}: Kafka's JSON {kafka_json}: {e}"));
                if kafka == hex && same_json(&read, json) {
                    same += 1;
                } else {
                    differences.push(format!(
                        "{what}:\n  corum wrote: {hex}\n  kafka wrote: {kafka}\n  \
                         corum's values: {json}\n  kafka's values: {kafka_json}"
                    ));
                }
            }
            Expect::FromJson {
                what,
                json,
                kraft_version,
            } => {
                let (kafka, kafka_json) = ok_hex(answer, what);
                let (read, ours) = match kraft_version {
                    None => {
                        let (record, version) = AnyMetadataRecord::decode_framed(unhex(kafka))
                            .unwrap_or_else(|e| {
                                panic!("{what}: corum cannot read Kafka's {kafka}: {e}")
                            });
                        (
                            json::metadata_record(&record, version),
                            framed(&record, version),
                        )
                    }
                    Some(version) => {
                        let record = KRaftVersionRecord::decode(&mut unhex(kafka), *version)
                            .unwrap_or_else(|e| {
                                panic!("{what}: corum cannot read Kafka's {kafka}: {e}")
                            });
                        let mut buf = BytesMut::new();
                        record.encode(*version, &mut buf).expect("encodes");
                        (json::kraft_version_record(&record, *version), buf.freeze())
                    }
                };
                if same_json(&read, json) && hex(&ours) == kafka {
                    from_json += 1;
                } else {
                    differences.push(format!(
                        "{what}:\n  kafka wrote: {kafka}\n  corum wrote: {}\n  \
                         corum's values: {json}\n  as corum read Kafka's: {read}\n  \
                         kafka's: {kafka_json}",
                        hex(&ours)
                    ));
                }
            }
            Expect::DefaultMetadata { api_key, version } => {
                let what = format!("the default of api key {api_key} at v{version}");
                let (kafka, json) = ok_hex(answer, &what);
                let ours = AnyMetadataRecord::default_for(*api_key).expect("a record type");
                assert_eq!(
                    AnyMetadataRecord::decode_framed(unhex(kafka)),
                    Ok((ours.clone(), *version)),
                    "Kafka's {what} ({json}) is not corum's Default"
                );
                assert_eq!(kafka, hex(&framed(&ours, *version)), "{what}: {json}");
            }
            Expect::DefaultKraftVersion { version } => {
                let what = format!("the default KRaftVersionRecord at v{version}");
                let (kafka, json) = ok_hex(answer, &what);
                let mut bytes = unhex(kafka);
                assert_eq!(
                    KRaftVersionRecord::decode(&mut bytes, *version),
                    Ok(KRaftVersionRecord::default()),
                    "Kafka's {what} ({json}) is not corum's Default"
                );
                let mut buf = BytesMut::new();
                KRaftVersionRecord::default()
                    .encode(*version, &mut buf)
                    .expect("encodes");
                assert_eq!(kafka, hex(&buf), "{what}: {json}");
            }
        }
    }
    assert!(
        differences.is_empty(),
        "Kafka read or wrote back {} of {} records differently (the first 10):\n{}",
        differences.len(),
        same + from_json + differences.len(),
        differences[..differences.len().min(10)].join("\n")
    );
    let record_versions = versions.len() + 1;
    assert_eq!(same, record_versions * SAMPLES_PER_VERSION);
    assert!(
        from_json * 10 >= same * 9,
        "only {from_json} of {same} records went through JSON"
    );
    eprintln!(
        "Kafka read and wrote back {same} records ({record_versions} record versions) as corum \
         writes them; corum read {from_json} records Kafka built from JSON as Kafka wrote them; \
         Kafka's defaults are corum's at all {record_versions} record versions"
    );
}
