//! A local quorum with TLS on every listener (the controller listener's mutual TLS, the
//! client listener requiring client certificates, the Kafka listener's `SSL`), from
//! certificates `corum certs` made: it elects a leader and commits writes over TLS
//! (`corum loadgen --command-config`); clients without a certificate, or with one from
//! another CA, are refused at the handshake (with a log line) and change nothing; a
//! controller restarted with a certificate from another CA cannot rejoin (the others refuse
//! it and it stops following); Kafka's Python clients and Java AdminClient connect over SSL.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    bootstrap_of, certs, corum, describe_with, kafka_tool, loadgen_json, logs, repo_root,
    require_java, serial, spawn_loadgen, start_cluster, wait_until,
};

/// Every node's whole log.
fn full_logs(c: &crate::common::LocalCluster) -> String {
    c.nodes
        .iter()
        .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The CA, three controllers, a client ("admin"), and a controller-3 certificate from
/// another CA; the client properties files for `--command-config`.
fn make_pki(dir: &Path) {
    let d = dir.to_str().unwrap();
    let other = dir.join("other");
    let o = other.to_str().unwrap();
    certs(&["ca", "--dir", d]);
    for id in 1..=3 {
        let name = format!("controller-{id}");
        certs(&[
            "issue",
            "--dir",
            d,
            "--common-name",
            &name,
            "--san",
            "127.0.0.1,localhost",
        ]);
    }
    certs(&[
        "issue",
        "--dir",
        d,
        "--common-name",
        "admin",
        "--organization",
        "corum",
    ]);
    certs(&["ca", "--dir", o, "--common-name", "another CA"]);
    certs(&[
        "issue",
        "--dir",
        o,
        "--common-name",
        "controller-3",
        "--san",
        "127.0.0.1",
    ]);
    certs(&["issue", "--dir", o, "--common-name", "admin"]);
    let props = |name: &str, keystore: &Path| {
        std::fs::write(
            dir.join(name),
            format!(
                "security.protocol=SSL\nssl.truststore.location={}\nssl.keystore.location={}\n",
                dir.join("ca.pem").display(),
                keystore.display()
            ),
        )
        .unwrap();
    };
    props("admin.properties", &dir.join("admin.pem"));
    props("stranger.properties", &other.join("admin.pem"));
    std::fs::write(
        dir.join("nocert.properties"),
        format!(
            "security.protocol=SSL\nssl.truststore.location={}\n",
            dir.join("ca.pem").display()
        ),
    )
    .unwrap();
}

#[test]
fn a_quorum_with_tls_on_every_listener_commits_and_refuses_the_unauthenticated() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    make_pki(&pki);
    let keystore = pki.join("controller-{id}.pem");
    let truststore = pki.join("ca.pem");
    let c = start_cluster(
        &tmp.path().join("cluster"),
        &[
            (
                "listener.security.protocol.map",
                "CONTROLLER:SSL,CLIENT:SSL,KAFKA:SSL",
            ),
            ("ssl.keystore.location", keystore.to_str().unwrap()),
            ("ssl.truststore.location", truststore.to_str().unwrap()),
            ("listener.name.client.ssl.client.auth", "required"),
        ],
    );
    let bootstrap = bootstrap_of(&c, &c.ids());
    let admin = pki.join("admin.properties");
    let admin = admin.to_str().unwrap();
    let d = wait_until("a leader over TLS", Duration::from_secs(60), || {
        describe_with(&bootstrap, 2_000, &["--command-config", admin])
    });
    assert_eq!(d["voters"].as_array().unwrap().len(), 3, "{d}");

    // Writes commit over TLS (the private protocol's client side, loadgen).
    let out = spawn_loadgen(
        &bootstrap,
        &[
            "--workload",
            "configs",
            "--clients",
            "8",
            "--connections",
            "2",
            "--duration",
            "2",
            "--verify",
            "--raw-quorum-writers",
            "0",
            "--rtt-probes",
            "0",
            "--command-config",
            admin,
        ],
    )
    .wait(Duration::from_secs(60));
    let report = loadgen_json(&out);
    assert!(
        out.status.success() && report["ops"].as_u64() > Some(0) && report["errors"] == 0,
        "{report}\n{}",
        logs(&c)
    );
    let before = describe_with(&bootstrap, 5_000, &["--command-config", admin]).unwrap();

    // No client certificate, one from another CA, no TLS at all: refused, nothing changes.
    for (props, expect) in [
        (Some("nocert.properties"), "CertificateRequired"),
        (Some("stranger.properties"), "fatal alert"),
        (None, "no active controller answered"),
    ] {
        let path = props.map(|p| pki.join(p));
        let mut args = vec![
            "quorum",
            "remove-controller",
            "--bootstrap",
            &bootstrap,
            "--controller-id",
            "3",
            "--controller-directory-id",
            "AAAAAAAAAAAAAAAAAAAAAQ",
            "--timeout-ms",
            "1500",
        ];
        if let Some(p) = &path {
            args.extend(["--command-config", p.to_str().unwrap()]);
        }
        let out = corum(&args, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.lines().last().unwrap_or_default();
        assert!(
            !out.status.success() && stderr.contains(expect) && !stderr.contains("static"),
            "{props:?}: {stderr}"
        );
    }
    let log = full_logs(&c);
    for reason in [
        "peer sent no certificates",
        "UnknownIssuer",
        "the client does not speak TLS",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("TLS handshake refused listener=CLIENT") && l.contains(reason)),
            "no log line with {reason:?}: {log}"
        );
    }
    let after = describe_with(&bootstrap, 5_000, &["--command-config", admin]).unwrap();
    assert_eq!(before["voters"], after["voters"]);
    assert_eq!(before["leader_epoch"], after["leader_epoch"]);

    // Kafka's Python clients over SSL (server authentication; the Kafka listener asks for
    // no client certificate).
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let script = r#"
import sys
from kafka.admin import KafkaAdminClient
from confluent_kafka.admin import AdminClient
bootstrap, ca = sys.argv[1], sys.argv[2]
a = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=ca, ssl_check_hostname=True, request_timeout_ms=20000)
d = a.describe_cluster()
print("kafka-python controller", d["controller_id"], "nodes", len(d["brokers"]))
a.close()
c = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca})
m = c.list_topics(timeout=20)
print("confluent-kafka cluster", m.cluster_id, "controller", m.controller_id)
print("PASS")
"#;
    let out = Command::new(repo_root().join("compat/.venv/bin/python"))
        .args(["-c", script, &kafka.join(","), truststore.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .expect("running compat/.venv/bin/python (run compat/install.sh first)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("PASS"),
        "Kafka's clients over SSL failed:\n{text}\n{}",
        logs(&c)
    );

    // Kafka's Java AdminClient (kafka-metadata-quorum from compat/jars) over SSL, with a PEM
    // truststore and the hostname checked against the certificate's IP SAN.
    require_java("install a JDK 17+ (compat/install.sh)");
    let java_props = pki.join("java.properties");
    std::fs::write(
        &java_props,
        format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
            truststore.display()
        ),
    )
    .unwrap();
    let out = kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand", "256m")
        .args([
            "--bootstrap-controller",
            &kafka[0],
            "--command-config",
            java_props.to_str().unwrap(),
            "describe",
            "--status",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("running java");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("LeaderId") && text.contains("CurrentVoters"),
        "kafka-metadata-quorum over SSL failed:\n{text}\n{}",
        logs(&c)
    );

    // SIGHUP: the node re-reads its TLS files at the next handshake and keeps serving.
    assert!(c.signal(1, libc::SIGHUP));
    wait_until("node 1 to log the SIGHUP", Duration::from_secs(10), || {
        std::fs::read_to_string(&c.node(1).log)
            .unwrap()
            .contains("SIGHUP: TLS keystores and truststores are re-read")
            .then_some(())
    });
    assert!(
        c.is_running(1) && describe_with(&bootstrap, 5_000, &["--command-config", admin]).is_some(),
        "node 1 runs on after SIGHUP, and the quorum serves TLS clients: {}",
        logs(&c)
    );

    // Controller 3 restarted with a certificate from another CA: the others refuse it.
    let mut c = c;
    c.terminate(3, Duration::from_secs(20)).unwrap();
    let own = pki.join("controller-3.pem");
    std::fs::copy(pki.join("other/controller-3.pem"), &own).unwrap();
    c.start(3).unwrap();
    let out = spawn_loadgen(
        &bootstrap_of(&c, &[1, 2]),
        &[
            "--workload",
            "configs",
            "--clients",
            "4",
            "--duration",
            "1",
            "--raw-quorum-writers",
            "0",
            "--rtt-probes",
            "0",
            "--command-config",
            admin,
        ],
    )
    .wait(Duration::from_secs(60));
    assert!(out.status.success(), "{}", logs(&c));
    let d = wait_until("node 3 seen behind", Duration::from_secs(30), || {
        let d = describe_with(
            &bootstrap_of(&c, &[1, 2]),
            5_000,
            &["--command-config", admin],
        )?;
        let hw = d["high_watermark"].as_u64()?;
        let r3 = d["replicas"]
            .as_array()?
            .iter()
            .find(|r| r["node_id"] == 3)?
            .clone();
        (r3["log_end_offset"].as_u64().unwrap_or(0) < hw).then_some(d)
    });
    // Both ways: node 3's connections are refused by the others' listeners (once it asks for
    // votes), and the others do not trust its listener.
    let others = || {
        std::fs::read_to_string(&c.node(1).log).unwrap()
            + &std::fs::read_to_string(&c.node(2).log).unwrap()
    };
    wait_until(
        "the others to refuse node 3",
        Duration::from_secs(30),
        || {
            others()
                .lines()
                .any(|l| {
                    l.contains("TLS handshake refused listener=CONTROLLER")
                        && l.contains("UnknownIssuer")
                })
                .then_some(())
        },
    );
    let log = others();
    assert!(
        log.lines()
            .any(|l| l.contains("TLS handshake failed") && l.contains("UnknownIssuer")),
        "the others do not trust its listener: {log}\n{d}"
    );
}
