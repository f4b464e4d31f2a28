//! Kafka's ACL model on corum's private client protocol: a 3-node quorum whose client listener
//! requires client certificates (mutual TLS, certificates from `corum certs`) with Kafka's
//! authorizer, `super.users=User:CN=admin,O=corum` and no ACL meaning no access. Every client
//! is a `corum` command with `--command-config`. The tenant's certificate is `User:TENANT`
//! through the listener's `ssl.principal.mapping.rules`. A tenant's certificate with no ACL is refused
//! CreateTopics, IncrementalAlterConfigs, DescribeQuorum and a voter change (the error names
//! the permission missing), and nothing changes; once the admin grants it ACLs with
//! `corum acls`, it is allowed, except where a DENY wins; a controller's certificate
//! (`controller-<id>`) passes without any ACL, and the nodes' registrations (a standby's reach
//! the active controller's client listener with its certificate) go through after a restart;
//! brokers (`corum loadgen --workload brokers`) register and heartbeat with CLUSTER_ACTION
//! granted to their principal; after a restart of every node the same decisions hold.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::common::*;

const ADMIN: &str = "User:CN=admin,O=corum";
/// The tenant's certificate says `CN=tenant,O=corum`; the client listener's
/// `ssl.principal.mapping.rules` name it `TENANT` (the others keep their DN: `DEFAULT`).
const TENANT: &str = "User:TENANT";
const BROKER: &str = "User:CN=broker,O=corum";

/// The CA, the three controllers' certificates, the clients' (admin, tenant, broker), and a
/// properties file for each client and for controller 2's certificate.
fn make_pki(dir: &Path) {
    let d = dir.to_str().unwrap();
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
    for client in ["admin", "tenant", "broker"] {
        certs(&[
            "issue",
            "--dir",
            d,
            "--common-name",
            client,
            "--organization",
            "corum",
        ]);
    }
    for (name, keystore) in [
        ("admin", "admin.pem"),
        ("tenant", "tenant.pem"),
        ("broker", "broker.pem"),
        ("controller", "controller-2.pem"),
    ] {
        std::fs::write(
            dir.join(format!("{name}.properties")),
            format!(
                "security.protocol=SSL\nssl.truststore.location={}\nssl.keystore.location={}\n",
                dir.join("ca.pem").display(),
                dir.join(keystore).display()
            ),
        )
        .unwrap();
    }
}

/// Runs `corum ARGS --bootstrap B --command-config PKI/WHO.properties`.
fn as_who(c: &LocalCluster, pki: &Path, who: &str, args: &[&str]) -> Output {
    let props = pki.join(format!("{who}.properties"));
    let bootstrap = c.bootstrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--bootstrap",
        &bootstrap,
        "--command-config",
        props.to_str().unwrap(),
    ]);
    corum(&all, Duration::from_secs(60))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `corum ARGS` as `who` succeeds; its stdout.
fn allowed(c: &LocalCluster, pki: &Path, who: &str, args: &[&str]) -> String {
    let out = as_who(c, pki, who, args);
    assert!(
        out.status.success(),
        "{who}: corum {args:?} failed:\n{}\n{}",
        text(&out),
        logs(c)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `corum ARGS` as `who` fails with Kafka's error `name`, naming the operation missing on the
/// resource, and the `corum acls` line that grants it.
fn refused(c: &LocalCluster, pki: &Path, who: &str, args: &[&str], name: &str, missing: &str) {
    let out = as_who(c, pki, who, args);
    let t = text(&out);
    assert!(
        !out.status.success()
            && t.contains(name)
            && t.contains(&format!("is not authorized to {missing}"))
            && t.contains("a super user grants it with: corum acls --add --allow-principal"),
        "{who}: corum {args:?} should fail with {name} ({missing}):\n{t}"
    );
}

/// `corum ARGS` as `who`, retried until it succeeds (an ACL just created is in force on a
/// node once that node has replayed it).
fn allowed_soon(c: &LocalCluster, pki: &Path, who: &str, args: &[&str]) -> String {
    wait_until(
        &format!("{who} allowed corum {args:?}"),
        Duration::from_secs(30),
        || {
            let out = as_who(c, pki, who, args);
            out.status.success().then(|| text(&out))
        },
    )
}

/// The voters and epoch the admin sees.
fn quorum(c: &LocalCluster, pki: &Path) -> (serde_json::Value, serde_json::Value) {
    let out = allowed(
        c,
        pki,
        "admin",
        &["quorum", "describe", "--status", "--json"],
    );
    let d: serde_json::Value = serde_json::from_str(out.trim()).expect("describe --json");
    (d["voters"].clone(), d["leader_epoch"].clone())
}

fn topics(c: &LocalCluster, pki: &Path) -> Vec<String> {
    allowed(c, pki, "admin", &["topics", "list"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The admin's description of `topic`'s configs.
fn configs_of(c: &LocalCluster, pki: &Path, topic: &str) -> String {
    allowed(
        c,
        pki,
        "admin",
        &[
            "configs",
            "describe",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
        ],
    )
}

/// What the tenant is refused and allowed with the ACLs the setup granted (before and after
/// the restart, with a topic name of `suffix`).
fn tenant_with_acls(c: &LocalCluster, pki: &Path, suffix: &str) {
    let topic = format!("t-{suffix}");
    allowed_soon(
        c,
        pki,
        "tenant",
        &["topics", "create", &topic, "--replication-factor", "1"],
    );
    // A DENY wins over the prefixed ALLOW.
    refused(
        c,
        pki,
        "tenant",
        &["topics", "create", "t-secret", "--replication-factor", "1"],
        "TOPIC_AUTHORIZATION_FAILED",
        "CREATE on TOPIC t-secret",
    );
    allowed(
        c,
        pki,
        "tenant",
        &[
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "retention.ms=7000",
        ],
    );
    let described = configs_of(c, pki, &topic);
    assert!(described.contains("retention.ms=7000"), "{described}");
    // No ACL names topics prefixed `other-`.
    refused(
        c,
        pki,
        "tenant",
        &[
            "topics",
            "create",
            &format!("other-{suffix}"),
            "--replication-factor",
            "1",
        ],
        "TOPIC_AUTHORIZATION_FAILED",
        &format!("CREATE on TOPIC other-{suffix}"),
    );
    // ALTER on the cluster: the voter change passes authorization and reaches the leader,
    // which refuses it for its own reason (the quorum is static).
    let out = as_who(
        c,
        pki,
        "tenant",
        &[
            "quorum",
            "remove-controller",
            "--controller-id",
            "3",
            "--controller-directory-id",
            "AAAAAAAAAAAAAAAAAAAAAQ",
            "--timeout-ms",
            "3000",
        ],
    );
    let t = text(&out);
    assert!(
        !out.status.success() && t.contains("static") && !t.contains("AUTHORIZATION"),
        "{t}"
    );
    let names = topics(c, pki);
    assert!(
        names.contains(&topic)
            && !names.contains(&"t-secret".to_owned())
            && !names.iter().any(|n| n.starts_with("other-")),
        "{names:?}"
    );
}

/// Registered brokers that are not fenced, as the admin lists them.
fn unfenced_brokers(c: &LocalCluster, pki: &Path) -> usize {
    let out = as_who(c, pki, "admin", &["brokers", "list", "--json"]);
    if !out.status.success() {
        return 0;
    }
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    list["brokers"]
        .as_array()
        .map_or(0, |b| b.iter().filter(|b| b["fenced"] == false).count())
}

#[test]
fn the_private_listener_authorizes_with_kafkas_acls() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    make_pki(&pki);
    let keystore = pki.join("controller-{id}.pem");
    let truststore = pki.join("ca.pem");
    let mut c = start_cluster(
        &tmp.path().join("cluster"),
        &[
            (
                "listener.security.protocol.map",
                "CONTROLLER:SSL,CLIENT:SSL,KAFKA:SSL",
            ),
            ("ssl.keystore.location", keystore.to_str().unwrap()),
            ("ssl.truststore.location", truststore.to_str().unwrap()),
            ("listener.name.client.ssl.client.auth", "required"),
            (
                "listener.name.client.ssl.principal.mapping.rules",
                "RULE:^CN=(tenant),O=corum$/$1/U, DEFAULT",
            ),
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", ADMIN),
        ],
    );
    // A leader the admin sees (the last failure kept for the message).
    let start = std::time::Instant::now();
    loop {
        let out = as_who(&c, &pki, "admin", &["quorum", "describe", "--status"]);
        if out.status.success() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no leader the admin sees: {}\n{}",
            text(&out),
            logs(&c)
        );
    }

    // The tenant has no ACL: refused everything it asks, and nothing changes.
    let before = quorum(&c, &pki);
    refused(
        &c,
        &pki,
        "tenant",
        &["topics", "create", "t-1", "--replication-factor", "1"],
        "TOPIC_AUTHORIZATION_FAILED",
        "CREATE on TOPIC t-1",
    );
    refused(
        &c,
        &pki,
        "tenant",
        &[
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.retention.ms=1000",
        ],
        "CLUSTER_AUTHORIZATION_FAILED",
        "ALTER_CONFIGS on CLUSTER kafka-cluster",
    );
    refused(
        &c,
        &pki,
        "tenant",
        &[
            "quorum",
            "remove-controller",
            "--controller-id",
            "3",
            "--controller-directory-id",
            "AAAAAAAAAAAAAAAAAAAAAQ",
            "--timeout-ms",
            "3000",
        ],
        "CLUSTER_AUTHORIZATION_FAILED",
        "ALTER on CLUSTER kafka-cluster",
    );
    refused(
        &c,
        &pki,
        "tenant",
        &["quorum", "describe", "--status", "--timeout-ms", "3000"],
        "CLUSTER_AUTHORIZATION_FAILED",
        "DESCRIBE on CLUSTER kafka-cluster",
    );
    refused(
        &c,
        &pki,
        "tenant",
        &["acls", "--add", "--allow-principal", TENANT, "--cluster"],
        "CLUSTER_AUTHORIZATION_FAILED",
        "ALTER on CLUSTER kafka-cluster",
    );
    assert_eq!(
        quorum(&c, &pki),
        before,
        "a refused voter change changed nothing"
    );
    assert!(topics(&c, &pki).is_empty(), "no topic was created");
    let defaults = allowed(
        &c,
        &pki,
        "admin",
        &[
            "configs",
            "describe",
            "--entity-type",
            "brokers",
            "--entity-default",
        ],
    );
    assert!(!defaults.contains("log.retention.ms=1000"), "{defaults}");
    let log: String = c
        .nodes
        .iter()
        .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
        .collect();
    assert!(
        log.lines()
            .any(|l| l.contains("authorization denied") && l.contains("principal=User:TENANT")),
        "no refusal logged:\n{}",
        logs(&c)
    );

    // A controller's certificate passes without any ACL: what a standby's forwards and the
    // registrations rely on.
    allowed(&c, &pki, "controller", &["quorum", "describe", "--status"]);
    allowed(
        &c,
        &pki,
        "controller",
        &[
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.retention.ms=3600000",
        ],
    );

    // The admin (a super user) grants: the brokers CLUSTER_ACTION (and DESCRIBE, for
    // loadgen's DescribeCluster); the tenant CREATE and ALTER_CONFIGS on topics prefixed
    // `t-`, ALTER on the cluster, and a DENY of CREATE on `t-secret`.
    for args in [
        vec![
            "--allow-principal",
            BROKER,
            "--operation",
            "CLUSTER_ACTION",
            "--operation",
            "DESCRIBE",
            "--cluster",
        ],
        vec![
            "--allow-principal",
            TENANT,
            "--operation",
            "CREATE",
            "--operation",
            "ALTER_CONFIGS",
            "--topic",
            "t-",
            "--resource-pattern-type",
            "prefixed",
        ],
        vec![
            "--allow-principal",
            TENANT,
            "--operation",
            "ALTER",
            "--cluster",
        ],
        vec![
            "--deny-principal",
            TENANT,
            "--operation",
            "CREATE",
            "--topic",
            "t-secret",
        ],
    ] {
        let mut all = vec!["acls", "--add"];
        all.extend(args);
        allowed(&c, &pki, "admin", &all);
    }

    // Brokers register and heartbeat as their principal.
    let bootstrap = c.bootstrap();
    let broker_props = pki.join("broker.properties");
    // Three brokers of the workload, registering and heartbeating with the broker's certificate.
    let spawn_brokers = |bootstrap: &str| {
        spawn_loadgen(
            bootstrap,
            &[
                "--workload",
                "brokers",
                "--brokers",
                "3",
                "--clients",
                "3",
                "--broker-id-base",
                "1",
                "--heartbeat-interval-ms",
                "500",
                "--duration",
                "600",
                "--raw-quorum-writers",
                "0",
                "--rtt-probes",
                "0",
                "--command-config",
                broker_props.to_str().unwrap(),
            ],
        )
    };
    let brokers = spawn_brokers(&bootstrap);
    wait_until("three unfenced brokers", Duration::from_secs(60), || {
        (unfenced_brokers(&c, &pki) == 3).then_some(())
    });
    tenant_with_acls(&c, &pki, "1");
    drop(brokers);

    // The same decisions after a restart of every node (the ACLs come back from the log).
    for (id, r) in c.terminate_all(Duration::from_secs(30)) {
        r.unwrap_or_else(|e| panic!("stopping node {id}: {e:#}"));
    }
    if let Err(e) = c.start_all() {
        panic!("restarting the cluster: {e:#}\n{}", logs(&c));
    }
    // Every node registers its new incarnation; a standby's registration reaches the active
    // controller's client listener with the node's certificate, which no ACL names.
    wait_until(
        "every node registered again",
        Duration::from_secs(60),
        || {
            c.nodes
                .iter()
                .all(|n| {
                    std::fs::read_to_string(&n.log)
                        .unwrap_or_default()
                        .matches("controller registered")
                        .count()
                        >= 2
                })
                .then_some(())
        },
    );
    let _brokers = spawn_brokers(&c.bootstrap());
    wait_until(
        "three unfenced brokers after the restart",
        Duration::from_secs(60),
        || (unfenced_brokers(&c, &pki) == 3).then_some(()),
    );
    tenant_with_acls(&c, &pki, "2");
    let listed = allowed(
        &c,
        &pki,
        "admin",
        &["acls", "--list", "--principal", TENANT],
    );
    assert!(
        listed.contains("operation=CREATE, permissionType=DENY"),
        "{listed}"
    );
}
