//! SASL end to end: a 3-node quorum whose Kafka listener is SASL_SSL with PLAIN (users in the
//! listener's JAAS entry) and SCRAM-SHA-256 (credentials in the metadata log), Kafka's
//! authorizer with `super.users=User:admin` (and `User:ANONYMOUS`, the PLAINTEXT client
//! listener's principal) and no ACL meaning no access. Real clients:
//! `corum users add` sets bob's credential over the private protocol; kafka-python
//! authenticates as bob (SCRAM) and is refused CreateTopics until admin (confluent-kafka,
//! PLAIN) allows it by ACL; admin adds carol's credential through Kafka's
//! AlterUserScramCredentials (confluent-kafka's AdminClient salts the password), Kafka's own
//! `kafka-configs` (Java AdminClient, SASL_SSL/PLAIN) adds dave's; wrong passwords and an
//! unknown user are refused, with a log line naming them. The credentials survive snapshots
//! and a restart of every node, and `corum users describe` lists them.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const ADMIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"admin-secret\" user_alice=\"alice-secret\";";

/// The clients' session. `setup` does the administration and checks each step; `check` only
/// checks what must hold after snapshots and a restart. Prints PASS.
const SESSION: &str = r#"
import sys, time
bootstrap, ca, mode = sys.argv[1], sys.argv[2], sys.argv[3]
from kafka.admin import (KafkaAdminClient, NewTopic, ACL, ResourcePattern, ACLOperation,
    ACLPermissionType, ResourceType, ACLResourcePatternType)
from kafka.errors import TopicAuthorizationFailedError, InvalidReplicationFactorError
import confluent_kafka
from confluent_kafka.admin import (AdminClient, UserScramCredentialUpsertion, ScramCredentialInfo,
    ScramMechanism)

T0 = time.time()
def step(what):
    sys.stderr.write("%.1fs %s\n" % (time.time() - T0, what))

def kp(user, password, mechanism="SCRAM-SHA-256", timeout_ms=20000, bootstrap_ms=30000):
    return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), security_protocol="SASL_SSL",
        ssl_cafile=ca, sasl_mechanism=mechanism, sasl_plain_username=user,
        sasl_plain_password=password, request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=bootstrap_ms)

def ck(user, password, mechanism):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}

def refused(user, password, mechanism):
    # kafka-python: a wrong password fails the connection's authentication.
    step("refused? %s %s" % (user, mechanism))
    try:
        kp(user, password, mechanism, timeout_ms=3000, bootstrap_ms=3000).close()
    except Exception as e:
        return
    raise SystemExit("%s with a wrong password was let in (kafka-python, %s)" % (user, mechanism))

def confluent_refused(user, password, mechanism):
    step("confluent refused? %s %s" % (user, mechanism))
    errors = []
    a = AdminClient(dict(ck(user, password, mechanism), error_cb=lambda e: errors.append(e)))
    try:
        a.list_topics(timeout=3)
    except confluent_kafka.KafkaException:
        pass
    else:
        raise SystemExit("%s with a wrong password was let in (confluent-kafka)" % user)
    a.poll(1)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors

def create(admin, name):
    # No broker is registered: an authorized creation reaches the controller, which answers
    # INVALID_REPLICATION_FACTOR; a refused one never gets there (TOPIC_AUTHORIZATION_FAILED).
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    except InvalidReplicationFactorError:
        pass

if mode == "setup":
    bob = kp("bob", "bob-secret")
    try:
        create(bob, "bob-1")
        raise SystemExit("bob created a topic without an ACL")
    except TopicAuthorizationFailedError:
        pass
    admin = AdminClient(ck("admin", "admin-secret", "PLAIN"))
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourceType as RT, ResourcePatternType
    fs = admin.create_acls([AclBinding(RT.TOPIC, "bob-", ResourcePatternType.PREFIXED, "User:bob", "*",
                                       AclOperation.CREATE, AclPermissionType.ALLOW)])
    for f in fs.values():
        f.result()
    fs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret")])
    for f in fs.values():
        f.result()
    # Each node enforces and authenticates with what it has replayed.
    time.sleep(1)
    create(bob, "bob-1")
    bob.close()
    desc = kp("admin", "admin-secret", "PLAIN").describe_user_scram_credentials(["bob", "carol"])
    assert desc, desc
if mode == "setup":
    refused("bob", "wrong", "SCRAM-SHA-256")
    refused("alice", "wrong", "PLAIN")
    refused("nobody", "bob-secret", "SCRAM-SHA-256")
    confluent_refused("bob", "wrong", "SCRAM-SHA-256")
    confluent_refused("alice", "wrong", "PLAIN")
step("authenticated clients")
# Authenticated principals: carol (SCRAM, set over Kafka's API) reads metadata with
# confluent-kafka; alice (PLAIN) and carol are refused CreateTopics (no ACL); bob creates.
carol = AdminClient(ck("carol", "carol-secret", "SCRAM-SHA-256"))
md = carol.list_topics(timeout=20)
assert md.cluster_id, md
for user, password, mechanism in [("alice", "alice-secret", "PLAIN"), ("carol", "carol-secret", "SCRAM-SHA-256")]:
    a = kp(user, password, mechanism)
    try:
        create(a, "x-" + user + "-" + mode)
        raise SystemExit("%s created a topic without an ACL" % user)
    except TopicAuthorizationFailedError:
        pass
    a.close()
bob = kp("bob", "bob-secret")
create(bob, "bob-" + mode)
bob.close()
if mode == "check":
    # dave's credential came from Kafka's kafka-configs before the restart.
    kp("dave", "dave-secret").close()
print("PASS")
"#;

fn session(c: &LocalCluster, ca: &Path, mode: &str) {
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let out = Command::new(repo_root().join("compat/.venv/bin/python"))
        .args(["-c", SESSION, &kafka.join(","), ca.to_str().unwrap(), mode])
        .stdin(Stdio::null())
        .output()
        .expect("running kafka-python and confluent-kafka (run compat/install.sh first)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The session's steps with their times (stderr), for a slow run.
    for line in text
        .lines()
        .filter(|l| l.ends_with(|c: char| c.is_alphanumeric()) && l.contains("s "))
    {
        if line
            .split_once("s ")
            .is_some_and(|(t, _)| t.parse::<f64>().is_ok())
        {
            eprintln!("{mode}: {line}");
        }
    }
    assert!(
        out.status.success() && text.contains("PASS"),
        "the {mode} session failed ({}):\n{text}\n{}",
        out.status,
        logs(c)
    );
}

fn ok(out: std::process::Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
fn sasl_clients_authenticate_are_authorized_and_credentials_survive_a_restart() {
    let _serial = serial();
    let t0 = std::time::Instant::now();
    let phase = |what: &str| eprintln!("sasl_process: {:.1}s {what}", t0.elapsed().as_secs_f64());
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let d = pki.to_str().unwrap();
    ok(
        corum(&["certs", "ca", "--dir", d], Duration::from_secs(30)),
        "certs ca",
    );
    for id in 1..=3 {
        let name = format!("controller-{id}");
        ok(
            corum(
                &[
                    "certs",
                    "issue",
                    "--dir",
                    d,
                    "--common-name",
                    &name,
                    "--san",
                    "127.0.0.1,localhost",
                ],
                Duration::from_secs(30),
            ),
            "certs issue",
        );
    }
    let ca = pki.join("ca.pem");
    let keystore = pki.join("controller-{id}.pem");
    let mut c = start_cluster(
        &tmp.path().join("cluster"),
        &[
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT,KAFKA:SASL_SSL",
            ),
            ("ssl.keystore.location", keystore.to_str().unwrap()),
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
            ("listener.name.kafka.plain.sasl.jaas.config", ADMIN_JAAS),
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            // The client listener is PLAINTEXT here: its connections (corum users, the
            // standbys' forwards and registrations) are User:ANONYMOUS, which Kafka's rule
            // for a PLAINTEXT inter-node listener makes a super user. The Kafka listener is
            // SASL_SSL: nothing there is ANONYMOUS.
            ("super.users", "User:admin;User:ANONYMOUS"),
            ("metadata.log.max.record.bytes.between.snapshots", "65536"),
            ("metadata.log.segment.bytes", "1048576"),
            ("metadata.max.retention.bytes", "0"),
        ],
    );
    let bootstrap = c.bootstrap();
    wait_until("a leader", Duration::from_secs(60), || {
        describe_with(&bootstrap_of(&c, &c.ids()), 2_000, &[])
    });
    let pw = tmp.path().join("bob.password");
    std::fs::write(&pw, "bob-secret\n").unwrap();
    ok(
        corum(
            &[
                "users",
                "--bootstrap",
                &bootstrap,
                "add",
                "--name",
                "bob",
                "--mechanism",
                "SCRAM-SHA-256",
                "--password-file",
                pw.to_str().unwrap(),
            ],
            Duration::from_secs(30),
        ),
        "corum users add",
    );
    phase("bob added");
    session(&c, &ca, "setup");
    phase("setup session done");
    // The refusals are logged with the peer, the mechanism and the user named.
    let all_logs: String = c
        .nodes
        .iter()
        .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
        .collect();
    assert!(
        all_logs.contains("SASL authentication failed")
            && all_logs.contains("user=\"bob\"")
            && all_logs.contains("invalid client proof"),
        "no log line for bob's wrong password\n{}",
        logs(&c)
    );

    // Kafka's kafka-configs (the Java AdminClient over SASL_SSL with PLAIN) adds dave.
    require_java("install a JDK 17+ (compat/install.sh)");
    let props = tmp.path().join("admin.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n",
            ca.display()
        ),
    )
    .unwrap();
    let out = kafka_tool("kafka.admin.ConfigCommand", "256m")
        .args([
            // Kafka's AdminClient refuses AlterUserScramCredentials toward a controller
            // (`--bootstrap-controller`): it goes to a broker, which forwards it. corum's
            // Kafka listener answers Metadata as that broker would.
            "--bootstrap-server",
            &c.nodes[0].kafka.to_string(),
            "--command-config",
            props.to_str().unwrap(),
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=dave-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "dave",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("running java");
    let text = ok(
        out,
        "kafka-configs --alter --add-config SCRAM-SHA-256=[...]",
    );
    assert!(text.contains("Completed updating config"), "{text}");

    phase("kafka-configs done");
    snapshot_and_restart_all(&mut c);
    wait_until("a leader again", Duration::from_secs(60), || {
        describe_with(&bootstrap_of(&c, &c.ids()), 2_000, &[])
    });
    phase("restarted");
    session(&c, &ca, "check");
    phase("check session done");
    let text = ok(
        corum(
            &["users", "--bootstrap", &c.bootstrap(), "describe"],
            Duration::from_secs(30),
        ),
        "corum users describe",
    );
    for line in [
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096",
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192",
        "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=8192",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}
