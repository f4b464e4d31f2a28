//! `corum acls --add|--remove|--list`: ACLs in the shape of Kafka's `kafka-acls`.
//!
//! | action | request | prints |
//! |---|---|---|
//! | `--add` | CreateAcls: every principal × host × operation × resource named | `Adding ACLs for resource …` then each ACL, as `kafka-acls` |
//! | `--remove` | DeleteAcls: one filter per resource (or every resource) with the principals, hosts and operations named | the ACLs removed |
//! | `--list` | DescribeAcls: one filter per resource (or all) | `Current ACLs for resource …` |
//!
//! Resources: `--topic`, `--group`, `--transactional-id` (repeatable), `--cluster`; with
//! `--resource-pattern-type` LITERAL (the default), PREFIXED, and for `--list`/`--remove` also
//! ANY and MATCH. `--allow-principal`/`--deny-principal` (Type:name, repeatable) with
//! `--allow-host`/`--deny-host` (default `*`) and `--operation` (default ALL). `--principal`
//! narrows `--list` to one principal.
//!
//! It speaks corum's private protocol (`--bootstrap`, the controllers' client listeners), like
//! every other `corum` admin command. With an authorizer the caller needs ALTER on the
//! cluster to add or remove ACLs and DESCRIBE to list them, on that listener as on the Kafka
//! listener (Kafka's own `kafka-acls` and AdminClient): the principal of its client
//! certificate (`--command-config`), or `User:ANONYMOUS` without one. The first ACLs are
//! added by a super user (`super.users`), as in Kafka.
//!
//! A refusal of any `corum` command names the permission missing, and this command's line
//! that grants it ([`grant_hint`]).

use std::fmt::Write as _;

use corum_client::{RequestBody, ResponseBody};
use corum_controller::acl::{
    codes, AclBindingV1, AclFilterV1, AclOperation, AclPermissionType, AuthorizationFailure,
    PatternType, ResourceType, CLUSTER_NAME, WILDCARD_HOST,
};
use corum_controller::control::acl_control::{
    CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
};
use serde::Serialize;

use crate::cmd::admin::{call, finish, to_json, with_client, ConnectArgs, ItemError, Outcome};

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("action").required(true).args(["add", "remove", "list"])))]
pub struct Args {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// Add ACLs.
    #[arg(long)]
    pub add: bool,
    /// Remove ACLs.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs.
    #[arg(long)]
    pub list: bool,
    /// A topic (repeatable).
    #[arg(long = "topic", value_name = "NAME")]
    pub topics: Vec<String>,
    /// A consumer group (repeatable).
    #[arg(long = "group", value_name = "NAME")]
    pub groups: Vec<String>,
    /// A transactional id (repeatable).
    #[arg(long = "transactional-id", value_name = "ID")]
    pub transactional_ids: Vec<String>,
    /// The cluster.
    #[arg(long)]
    pub cluster: bool,
    /// LITERAL (default), PREFIXED; ANY or MATCH with --list and --remove.
    #[arg(long, default_value = "literal")]
    pub resource_pattern_type: String,
    /// A principal allowed (Type:name, repeatable).
    #[arg(long = "allow-principal", value_name = "PRINCIPAL")]
    pub allow_principals: Vec<String>,
    /// A principal denied (Type:name, repeatable).
    #[arg(long = "deny-principal", value_name = "PRINCIPAL")]
    pub deny_principals: Vec<String>,
    /// A host the allowed principals may come from (default *).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// A host the denied principals are refused from (default *).
    #[arg(long = "deny-host", value_name = "HOST")]
    pub deny_hosts: Vec<String>,
    /// An operation (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
    /// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL; repeatable; default ALL).
    #[arg(long = "operation", value_name = "OPERATION")]
    pub operations: Vec<String>,
    /// With --list: only this principal's ACLs.
    #[arg(long)]
    pub principal: Option<String>,
    /// Accepted for kafka-acls' scripts: corum never asks for confirmation.
    #[arg(long)]
    pub force: bool,
}

/// The `corum acls` arguments that grant what `failure` says is missing, for the refusal's
/// message: `corum acls --add --allow-principal 'User:CN=tenant' --operation CREATE --topic
/// orders` (the caller adds `--bootstrap` and a super user's `--command-config`).
pub fn grant_hint(failure: &AuthorizationFailure) -> String {
    let resource = match failure.resource_type {
        ResourceType::Cluster => "--cluster".to_owned(),
        ResourceType::Topic => format!("--topic {}", failure.resource_name),
        ResourceType::Group => format!("--group {}", failure.resource_name),
        ResourceType::TransactionalId => format!("--transactional-id {}", failure.resource_name),
        ResourceType::DelegationToken | ResourceType::User => {
            format!("--{} {}", failure.resource_type, failure.resource_name)
        }
    };
    format!(
        "corum acls --add --allow-principal '{}' --operation {} {resource}",
        failure.principal.replace('\'', "'\\''"),
        failure.operation
    )
}

/// The resources named, each as (type, name).
fn resources(a: &Args) -> Vec<(ResourceType, String)> {
    let mut out: Vec<(ResourceType, String)> = Vec::new();
    out.extend(a.topics.iter().map(|t| (ResourceType::Topic, t.clone())));
    out.extend(a.groups.iter().map(|g| (ResourceType::Group, g.clone())));
    out.extend(
        a.transactional_ids
            .iter()
            .map(|t| (ResourceType::TransactionalId, t.clone())),
    );
    if a.cluster {
        out.push((ResourceType::Cluster, CLUSTER_NAME.to_owned()));
    }
    out
}

/// The pattern type code: LITERAL or PREFIXED, and ANY or MATCH when `filter`.
fn pattern_code(text: &str, filter: bool) -> anyhow::Result<i8> {
    match text.trim().to_ascii_uppercase().as_str() {
        "ANY" if filter => Ok(codes::ANY),
        "MATCH" if filter => Ok(codes::MATCH),
        other => PatternType::parse(other)
            .map(PatternType::code)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--resource-pattern-type {text:?}: expected LITERAL or PREFIXED{}",
                    if filter { ", ANY or MATCH" } else { "" }
                )
            }),
    }
}

fn operations(a: &Args) -> anyhow::Result<Vec<AclOperation>> {
    if a.operations.is_empty() {
        return Ok(vec![AclOperation::All]);
    }
    a.operations
        .iter()
        .map(|o| {
            AclOperation::parse(o)
                .ok_or_else(|| anyhow::anyhow!("--operation {o:?}: no such operation"))
        })
        .collect()
}

/// (principal, host, permission) of every entry the principals and hosts name.
fn entries(a: &Args) -> Vec<(String, String, AclPermissionType)> {
    let hosts = |h: &Vec<String>| {
        if h.is_empty() {
            vec![WILDCARD_HOST.to_owned()]
        } else {
            h.clone()
        }
    };
    let mut out = Vec::new();
    for (principals, hs, perm) in [
        (
            &a.allow_principals,
            hosts(&a.allow_hosts),
            AclPermissionType::Allow,
        ),
        (
            &a.deny_principals,
            hosts(&a.deny_hosts),
            AclPermissionType::Deny,
        ),
    ] {
        for p in principals {
            for h in &hs {
                out.push((p.clone(), h.clone(), perm));
            }
        }
    }
    out
}

/// The CreateAcls request of `--add`.
pub fn add_request(a: &Args) -> anyhow::Result<CreateAclsRequest> {
    let res = resources(a);
    anyhow::ensure!(
        !res.is_empty(),
        "--add needs a resource: --topic, --group, --transactional-id or --cluster"
    );
    let who = entries(a);
    anyhow::ensure!(
        !who.is_empty(),
        "--add needs --allow-principal or --deny-principal"
    );
    let pattern = pattern_code(&a.resource_pattern_type, false)?;
    let ops = operations(a)?;
    let mut creations = Vec::new();
    for (t, name) in &res {
        for (principal, host, perm) in &who {
            for op in &ops {
                creations.push(AclBindingV1 {
                    resource_type: t.code(),
                    resource_name: name.clone(),
                    pattern_type: pattern,
                    principal: principal.clone(),
                    host: host.clone(),
                    operation: op.code(),
                    permission_type: perm.code(),
                });
            }
        }
    }
    Ok(CreateAclsRequest { creations })
}

/// The filters of `--remove` and `--list`: one per resource (or one for every resource),
/// times each principal, host and operation named (or any).
pub fn filters(a: &Args) -> anyhow::Result<Vec<AclFilterV1>> {
    let pattern = pattern_code(&a.resource_pattern_type, true)?;
    let res: Vec<(i8, Option<String>)> = {
        let named = resources(a);
        if named.is_empty() {
            vec![(codes::ANY, None)]
        } else {
            named
                .into_iter()
                .map(|(t, n)| (t.code(), Some(n)))
                .collect()
        }
    };
    let pattern = if res[0].1.is_none() && pattern == PatternType::Literal.code() && a.list {
        codes::ANY
    } else {
        pattern
    };
    let mut who: Vec<(Option<String>, Option<String>, i8)> = entries(a)
        .into_iter()
        .map(|(p, h, perm)| {
            let host =
                (h != WILDCARD_HOST || !a.allow_hosts.is_empty() || !a.deny_hosts.is_empty())
                    .then_some(h);
            (Some(p), host, perm.code())
        })
        .collect();
    if who.is_empty() {
        who.push((a.principal.clone(), None, codes::ANY));
    }
    let ops: Vec<i8> = if a.operations.is_empty() {
        vec![codes::ANY]
    } else {
        operations(a)?.into_iter().map(AclOperation::code).collect()
    };
    let mut out = Vec::new();
    for (t, name) in &res {
        for (principal, host, perm) in &who {
            for op in &ops {
                out.push(AclFilterV1 {
                    resource_type: *t,
                    resource_name: name.clone(),
                    pattern_type: pattern,
                    principal: principal.clone(),
                    host: host.clone(),
                    operation: *op,
                    permission_type: *perm,
                });
            }
        }
    }
    Ok(out)
}

#[derive(Serialize)]
struct AclJson {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission_type: String,
}

fn name_of<T: std::fmt::Display>(code: i8, parse: fn(i8) -> Option<T>) -> String {
    parse(code).map_or_else(|| code.to_string(), |v| v.to_string())
}

fn json_of(a: &AclBindingV1) -> AclJson {
    AclJson {
        resource_type: name_of(a.resource_type, ResourceType::from_code),
        resource_name: a.resource_name.clone(),
        pattern_type: name_of(a.pattern_type, PatternType::from_code),
        principal: a.principal.clone(),
        host: a.host.clone(),
        operation: name_of(a.operation, AclOperation::from_code),
        permission_type: name_of(a.permission_type, AclPermissionType::from_code),
    }
}

/// ACLs grouped by resource pattern as `kafka-acls` prints them, under `heading`.
pub fn render(heading: &str, acls: &[AclBindingV1]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for a in acls {
        let j = json_of(a);
        let key = format!(
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            j.resource_type, j.resource_name, j.pattern_type
        );
        let line = format!(
            "(principal={}, host={}, operation={}, permissionType={})",
            j.principal, j.host, j.operation, j.permission_type
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, lines)) => lines.push(line),
            None => groups.push((key, vec![line])),
        }
    }
    let mut text = String::new();
    for (key, lines) in groups {
        let _ = writeln!(text, "{heading} `{key}`:");
        for l in lines {
            let _ = writeln!(text, " \t{l} ");
        }
        text.push('\n');
    }
    text
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.add {
        let req = add_request(&a)?;
        let asked = req.creations.clone();
        let r = with_client(&a.conn, |client| async move {
            call(&client, RequestBody::CreateAcls(req), |r| match r {
                ResponseBody::CreateAcls(r) => Ok(r),
                other => Err(other),
            })
            .await
        })?;
        let mut outcome = Outcome::ok(
            render("Adding ACLs for resource", &asked),
            to_json(&asked.iter().map(json_of).collect::<Vec<_>>()),
        );
        for (acl, result) in asked.iter().zip(&r.results) {
            if let Err(e) = result {
                outcome.failures.push((
                    format!("{} {}", acl.principal, acl.resource_name),
                    ItemError::api(e),
                ));
            }
        }
        return finish(outcome, a.conn.json);
    }
    let filters = filters(&a)?;
    if a.remove {
        let req = DeleteAclsRequest { filters };
        let r = with_client(&a.conn, |client| async move {
            call(&client, RequestBody::DeleteAcls(req), |r| match r {
                ResponseBody::DeleteAcls(r) => Ok(r),
                other => Err(other),
            })
            .await
        })?;
        let mut removed = Vec::new();
        let mut failures = Vec::new();
        for (i, result) in r.results.iter().enumerate() {
            match result {
                Ok(acls) => removed.extend(acls.iter().cloned()),
                Err(e) => failures.push((format!("filter {i}"), ItemError::api(e))),
            }
        }
        let mut outcome = Outcome::ok(
            render("Removed ACLs for resource", &removed),
            to_json(&removed.iter().map(json_of).collect::<Vec<_>>()),
        );
        outcome.failures = failures;
        return finish(outcome, a.conn.json);
    }
    let mut all: Vec<AclBindingV1> = Vec::new();
    for filter in filters {
        let req = DescribeAclsRequest { filter };
        let r = with_client(&a.conn, |client| async move {
            call(
                &client,
                RequestBody::DescribeAcls(Box::new(req)),
                |r| match r {
                    ResponseBody::DescribeAcls(r) => Ok(r),
                    other => Err(other),
                },
            )
            .await
        })?;
        for acl in r.acls {
            if !all.contains(&acl) {
                all.push(acl);
            }
        }
    }
    finish(
        Outcome::ok(
            render("Current ACLs for resource", &all),
            to_json(&all.iter().map(json_of).collect::<Vec<_>>()),
        ),
        a.conn.json,
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The hint is a `corum acls` line that parses and grants exactly the permission missing.
    #[test]
    fn a_refusal_hints_at_the_acl_that_grants_it() {
        let failure = AuthorizationFailure {
            principal: "User:CN=tenant,O=corum".into(),
            operation: AclOperation::AlterConfigs,
            resource_type: ResourceType::Topic,
            resource_name: "orders".into(),
        };
        let hint = grant_hint(&failure);
        assert_eq!(
            hint,
            "corum acls --add --allow-principal 'User:CN=tenant,O=corum' --operation ALTER_CONFIGS --topic orders"
        );
        let mut argv = vec!["corum-acls", "--bootstrap", "127.0.0.1:9094"];
        argv.extend(
            hint.trim_start_matches("corum acls ")
                .split(' ')
                .map(|w| w.trim_matches('\'')),
        );
        let a = Cli::parse_from(argv).args;
        let req = add_request(&a).unwrap();
        assert_eq!(req.creations.len(), 1);
        let acl = &req.creations[0];
        assert_eq!(acl.principal, "User:CN=tenant,O=corum");
        assert_eq!(acl.operation, AclOperation::AlterConfigs.code());
        assert_eq!(acl.resource_name, "orders");
        let cluster = AuthorizationFailure {
            resource_type: ResourceType::Cluster,
            resource_name: CLUSTER_NAME.into(),
            operation: AclOperation::Alter,
            principal: "User:O'Brien".into(),
        };
        assert_eq!(
            grant_hint(&cluster),
            "corum acls --add --allow-principal 'User:O'\\''Brien' --operation ALTER --cluster"
        );
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &str) -> Args {
        let words = std::iter::once("acls").chain(line.split_whitespace());
        Cli::try_parse_from(words).expect("parses").args
    }

    /// `--add` multiplies principals, hosts, operations and resources, as kafka-acls does.
    #[test]
    fn add_names_every_combination() {
        let a = parse(
            "--bootstrap 127.0.0.1:9094 --add --allow-principal User:alice --allow-principal User:bob \
             --operation read --operation Describe --topic orders --group g1 --resource-pattern-type prefixed",
        );
        let r = add_request(&a).unwrap();
        assert_eq!(r.creations.len(), 2 * 2 * 2);
        assert!(r
            .creations
            .iter()
            .all(|c| c.pattern_type == PatternType::Prefixed.code() && c.host == "*"));
        assert!(r
            .creations
            .iter()
            .any(|c| c.resource_type == ResourceType::Group.code()
                && c.principal == "User:bob"
                && c.operation == AclOperation::Describe.code()));
        let deny = parse("--bootstrap 127.0.0.1:9094 --add --deny-principal User:eve --deny-host 10.0.0.1 --cluster");
        let r = add_request(&deny).unwrap();
        assert_eq!(r.creations.len(), 1);
        let c = &r.creations[0];
        assert_eq!(
            (c.resource_name.as_str(), c.host.as_str()),
            (CLUSTER_NAME, "10.0.0.1")
        );
        assert_eq!(c.permission_type, AclPermissionType::Deny.code());
        assert_eq!(c.operation, AclOperation::All.code());
        assert!(add_request(&parse("--bootstrap 127.0.0.1:9094 --add --topic t")).is_err());
        assert!(add_request(&parse(
            "--bootstrap 127.0.0.1:9094 --add --topic t --allow-principal User:a --resource-pattern-type match"
        ))
        .is_err());
    }

    /// `--list` without a resource lists everything; `--remove` of a topic filters by it.
    #[test]
    fn list_and_remove_filters() {
        let all = filters(&parse("--bootstrap 127.0.0.1:9094 --list")).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].resource_type, all[0].pattern_type, all[0].operation),
            (codes::ANY, codes::ANY, codes::ANY)
        );
        let mine = filters(&parse("--bootstrap 127.0.0.1:9094 --list --principal User:a --topic t --resource-pattern-type match")).unwrap();
        assert_eq!(mine[0].principal.as_deref(), Some("User:a"));
        assert_eq!(mine[0].pattern_type, codes::MATCH);
        let rm = filters(&parse("--bootstrap 127.0.0.1:9094 --remove --topic t --allow-principal User:a --operation write")).unwrap();
        assert_eq!(rm.len(), 1);
        assert_eq!(rm[0].resource_name.as_deref(), Some("t"));
        assert_eq!(rm[0].host, None);
        assert_eq!(rm[0].operation, AclOperation::Write.code());
        assert_eq!(rm[0].permission_type, AclPermissionType::Allow.code());
    }

    #[test]
    fn renders_like_kafka_acls() {
        let acl = AclBindingV1 {
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        };
        assert_eq!(
            render("Current ACLs for resource", &[acl]),
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
        );
    }
}
