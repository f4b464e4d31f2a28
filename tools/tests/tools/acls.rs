//! ACLs end to end: a 3-node quorum with Kafka's authorizer (`authorizer.class.name`),
//! `allow.everyone.if.no.acl.found=true`, and Kafka's Python client (kafka-python, from
//! `compat/install.sh`) creating, listing and deleting ACLs over the Kafka listener. A DENY of
//! CREATE for `User:ANONYMOUS` on topics prefixed `secret-` makes CreateTopics of `secret-x`
//! fail with TOPIC_AUTHORIZATION_FAILED while `open-x` is created (ALLOWs of ALTER and
//! DESCRIBE on the cluster put an ACL there, so that CREATE on the cluster, which would allow
//! every topic, is not allowed by the no-ACL rule). The client listener is PLAINTEXT, so its
//! clients are `User:ANONYMOUS` too and need the cluster's ACLs from then on: CLUSTER_ACTION
//! for the simulated brokers and the standbys' registrations, ALTER_CONFIGS for the configs
//! workload. The ACL survives snapshots
//! (written every 64 KiB of records) and a restart of every node; `corum acls --list` sees it
//! through the private protocol.

use std::process::{Command, Stdio};
use std::time::Duration;

use corum_client::ControllerClient;
use corum_node::{RequestBody, ResponseBody};

use crate::common::*;

/// Registered brokers that are not fenced (0 while no leader answers).
fn unfenced_brokers(c: &LocalCluster) -> usize {
    let config = corum_client::ClientConfig::new(client_addrs(c));
    on_executor(Duration::from_secs(30), move || async move {
        let Ok(client) = ControllerClient::connect(config).await else {
            return 0;
        };
        match client.call(RequestBody::DescribeCluster).await {
            Ok(ResponseBody::DescribeCluster(d)) => d.brokers.iter().filter(|b| !b.fenced).count(),
            _ => 0,
        }
    })
}

const SETTINGS: [(&str, &str); 5] = [
    (
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ),
    ("allow.everyone.if.no.acl.found", "true"),
    ("metadata.log.max.record.bytes.between.snapshots", "65536"),
    ("metadata.log.segment.bytes", "1048576"),
    ("metadata.max.retention.bytes", "0"),
];

/// The client's session: `setup` adds the DENY (and an ACL it then deletes by filter),
/// `check` only checks; both then check the ACLs listed and the two creations (topics named
/// with `suffix`). Prints PASS.
const SESSION: &str = r#"
import sys, time
from kafka.admin import (KafkaAdminClient, NewTopic, ACL, ACLFilter, ResourcePattern,
    ResourcePatternFilter, ACLOperation, ACLPermissionType, ResourceType, ACLResourcePatternType)
from kafka.errors import TopicAuthorizationFailedError

bootstrap, mode, suffix = sys.argv[1], sys.argv[2], sys.argv[3]
a = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30000)
deny = ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.CREATE,
           permission_type=ACLPermissionType.DENY,
           resource_pattern=ResourcePattern(ResourceType.TOPIC, "secret-", ACLResourcePatternType.PREFIXED))
# With no ACL on the cluster, allow.everyone.if.no.acl.found would allow CREATE on it, which
# allows every topic (Kafka's ControllerApis): ACLs on the cluster make the topic ACL count.
# ANONYMOUS is also the PLAINTEXT client listener's principal: its brokers and the standbys'
# registrations need CLUSTER_ACTION, the configs workload ALTER_CONFIGS.
CLUSTER_OPS = (ACLOperation.ALTER, ACLOperation.DESCRIBE, ACLOperation.CLUSTER_ACTION,
               ACLOperation.ALTER_CONFIGS)
cluster = [ACL(principal="User:ANONYMOUS", host="*", operation=op, permission_type=ACLPermissionType.ALLOW,
               resource_pattern=ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL))
           for op in CLUSTER_OPS]
everything = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                       permission_type=ACLPermissionType.ANY,
                       resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
if mode == "setup":
    other = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL))
    r = a.create_acls([deny, other] + cluster)
    assert not r["failed"], r
    acls, err = a.describe_acls(everything)
    assert len(acls) == 2 + len(CLUSTER_OPS), acls
    r = a.delete_acls([ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                 permission_type=ACLPermissionType.ANY,
                                 resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL))])
    deleted = r[0][1]
    assert len(deleted) == 1, r
    # An answer leaves at commit; each node enforces once it has replayed the ACLs.
    time.sleep(1)
acls, err = a.describe_acls(everything)
assert sorted((x.principal, x.operation, x.permission_type, x.resource_pattern.resource_name,
         x.resource_pattern.pattern_type) for x in acls) == sorted([
    ("User:ANONYMOUS", ACLOperation.CREATE, ACLPermissionType.DENY, "secret-", ACLResourcePatternType.PREFIXED)] + [
    ("User:ANONYMOUS", op, ACLPermissionType.ALLOW, "kafka-cluster", ACLResourcePatternType.LITERAL)
    for op in CLUSTER_OPS]), acls
try:
    a.create_topics([NewTopic("secret-" + suffix, 1, 1)])
    raise SystemExit("secret-%s was created" % suffix)
except TopicAuthorizationFailedError:
    pass
a.create_topics([NewTopic("open-" + suffix, 1, 1)])
print("PASS")
"#;

fn session(c: &LocalCluster, mode: &str, suffix: &str) {
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let out = Command::new(repo_root().join("compat/.venv/bin/python"))
        .args(["-c", SESSION, &kafka.join(","), mode, suffix])
        .stdin(Stdio::null())
        .output()
        .expect("running kafka-python (run compat/install.sh first)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("PASS"),
        "the {mode} session failed ({}):\n{text}\n{}",
        out.status,
        logs(c)
    );
}

#[test]
fn acls_are_enforced_and_survive_snapshots_and_a_restart() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &SETTINGS);
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let kafka = kafka.join(",");
    // Brokers for the topics (simulated, on the private protocol).
    let _brokers = spawn_loadgen(
        &bootstrap_of(&c, &c.ids()),
        &[
            "--workload",
            "brokers",
            "--brokers",
            "3",
            "--clients",
            "3",
            "--broker-id-base",
            "1",
            "--broker-listeners",
            &kafka,
            "--heartbeat-interval-ms",
            "500",
            "--duration",
            "600",
            "--raw-quorum-writers",
            "0",
            "--rtt-probes",
            "0",
        ],
    );
    wait_until("three unfenced brokers", Duration::from_secs(60), || {
        (unfenced_brokers(&c) == 3).then_some(())
    });
    session(&c, "setup", "x");

    snapshot_and_restart_all(&mut c);
    wait_until(
        "three unfenced brokers again",
        Duration::from_secs(60),
        || (unfenced_brokers(&c) == 3).then_some(()),
    );
    session(&c, "check", "y");

    let listed = corum(
        &["acls", "--bootstrap", &c.bootstrap(), "--list"],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success()
            && text.contains(
                "ResourcePattern(resourceType=TOPIC, name=secret-, patternType=PREFIXED)"
            )
            && text.contains(
                "(principal=User:ANONYMOUS, host=*, operation=CREATE, permissionType=DENY)"
            ),
        "{text}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
}
