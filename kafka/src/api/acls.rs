//! DescribeAcls, CreateAcls and DeleteAcls.
//!
//! Without an authorizer (`authorizer.class.name` empty, the default) they answer as a Kafka
//! cluster without one: SECURITY_DISABLED (54), so clients that read a server's version from
//! the APIs it lists (kafka-python) still see a current server. With one, they become corum's
//! CreateAcls, DeleteAcls and DescribeAcls (the controller validates each ACL and filter
//! with Kafka's rules; a refused one is INVALID_REQUEST with the reason), after the caller's
//! own check: ALTER on the cluster to create or delete, DESCRIBE to describe
//! (CLUSTER_AUTHORIZATION_FAILED otherwise, [`crate::auth`]).

use corum_controller::acl::{AclBindingV1, AclFilterV1};
use corum_controller::control::acl_control::{
    CreateAclsRequest as CorumCreate, DeleteAclsRequest as CorumDelete,
    DescribeAclsRequest as CorumDescribe,
};
use corum_protocol::{LocalRead, RequestBody, ResponseBody};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::text;
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

const REASON: &str = "no authorizer is configured (authorizer.class.name is empty)";

fn disabled() -> KafkaError {
    KafkaError::new(ResponseError::SecurityDisabled, REASON.to_owned())
}

fn message(e: &KafkaError) -> Option<StrBytes> {
    e.message.as_deref().map(text)
}

fn optional(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_owned())
}

/// DescribeAcls; `enabled` is whether an authorizer is configured.
pub async fn describe_acls<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: DescribeAclsRequest,
    enabled: bool,
) -> DescribeAclsResponse {
    let failed = |e: KafkaError| {
        DescribeAclsResponse::default()
            .with_error_code(e.code)
            .with_error_message(message(&e))
    };
    if !enabled {
        return failed(disabled());
    }
    let filter = AclFilterV1 {
        resource_type: r.resource_type_filter,
        resource_name: optional(&r.resource_name_filter),
        pattern_type: r.pattern_type_filter,
        principal: optional(&r.principal_filter),
        host: optional(&r.host_filter),
        operation: r.operation,
        permission_type: r.permission_type,
    };
    let body = read(LocalRead::DescribeAcls(Box::new(CorumDescribe { filter })));
    let acls = match call(backend, body, ctx.default_timeout_ms, |r| match r {
        ResponseBody::DescribeAcls(r) => Some(r.acls),
        _ => None,
    })
    .await
    {
        Ok(acls) => acls,
        Err(e) => return failed(KafkaError::rpc(&e)),
    };
    // One entry per resource pattern, in the order the ACLs came (by id).
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for a in acls {
        let entry = AclDescription::default()
            .with_principal(text(&a.principal))
            .with_host(text(&a.host))
            .with_operation(a.operation)
            .with_permission_type(a.permission_type);
        match resources.iter_mut().find(|res| {
            res.resource_type == a.resource_type
                && res.pattern_type == a.pattern_type
                && res.resource_name.as_str() == a.resource_name
        }) {
            Some(res) => res.acls.push(entry),
            None => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(a.resource_type)
                    .with_resource_name(text(&a.resource_name))
                    .with_pattern_type(a.pattern_type)
                    .with_acls(vec![entry]),
            ),
        }
    }
    DescribeAclsResponse::default().with_resources(resources)
}

/// CreateAcls: one result per ACL, in order.
pub async fn create_acls<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: CreateAclsRequest,
    enabled: bool,
) -> CreateAclsResponse {
    let all = |e: KafkaError, n: usize| {
        CreateAclsResponse::default().with_results(
            (0..n)
                .map(|_| {
                    AclCreationResult::default()
                        .with_error_code(e.code)
                        .with_error_message(message(&e))
                })
                .collect(),
        )
    };
    let n = r.creations.len();
    if !enabled {
        return all(disabled(), n);
    }
    let creations = r
        .creations
        .iter()
        .map(|c| AclBindingV1 {
            resource_type: c.resource_type,
            resource_name: c.resource_name.as_str().to_owned(),
            pattern_type: c.resource_pattern_type,
            principal: c.principal.as_str().to_owned(),
            host: c.host.as_str().to_owned(),
            operation: c.operation,
            permission_type: c.permission_type,
        })
        .collect();
    let body = RequestBody::CreateAcls(CorumCreate { creations });
    match call(backend, body, ctx.default_timeout_ms, |r| match r {
        ResponseBody::CreateAcls(r) => Some(r.results),
        _ => None,
    })
    .await
    {
        Ok(results) => CreateAclsResponse::default().with_results(
            (0..n)
                .map(|i| match results.get(i) {
                    Some(Ok(())) => AclCreationResult::default(),
                    Some(Err(e)) => {
                        let e = KafkaError::api(e);
                        AclCreationResult::default()
                            .with_error_code(e.code)
                            .with_error_message(message(&e))
                    }
                    None => AclCreationResult::default()
                        .with_error_code(ResponseError::UnknownServerError.code()),
                })
                .collect(),
        ),
        Err(e) => all(KafkaError::rpc(&e), n),
    }
}

/// DeleteAcls: per filter, the ACLs it removed.
pub async fn delete_acls<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: DeleteAclsRequest,
    enabled: bool,
) -> DeleteAclsResponse {
    let all = |e: KafkaError, n: usize| {
        DeleteAclsResponse::default().with_filter_results(
            (0..n)
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(e.code)
                        .with_error_message(message(&e))
                })
                .collect(),
        )
    };
    let n = r.filters.len();
    if !enabled {
        return all(disabled(), n);
    }
    let filters = r
        .filters
        .iter()
        .map(|f| AclFilterV1 {
            resource_type: f.resource_type_filter,
            resource_name: optional(&f.resource_name_filter),
            pattern_type: f.pattern_type_filter,
            principal: optional(&f.principal_filter),
            host: optional(&f.host_filter),
            operation: f.operation,
            permission_type: f.permission_type,
        })
        .collect();
    let body = RequestBody::DeleteAcls(CorumDelete { filters });
    match call(backend, body, ctx.default_timeout_ms, |r| match r {
        ResponseBody::DeleteAcls(r) => Some(r.results),
        _ => None,
    })
    .await
    {
        Ok(results) => DeleteAclsResponse::default().with_filter_results(
            (0..n)
                .map(|i| match results.get(i) {
                    Some(Ok(acls)) => DeleteAclsFilterResult::default().with_matching_acls(
                        acls.iter()
                            .map(|a| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(a.resource_type)
                                    .with_resource_name(text(&a.resource_name))
                                    .with_pattern_type(a.pattern_type)
                                    .with_principal(text(&a.principal))
                                    .with_host(text(&a.host))
                                    .with_operation(a.operation)
                                    .with_permission_type(a.permission_type)
                            })
                            .collect(),
                    ),
                    Some(Err(e)) => {
                        let e = KafkaError::api(e);
                        DeleteAclsFilterResult::default()
                            .with_error_code(e.code)
                            .with_error_message(message(&e))
                    }
                    None => DeleteAclsFilterResult::default()
                        .with_error_code(ResponseError::UnknownServerError.code()),
                })
                .collect(),
        ),
        Err(e) => all(KafkaError::rpc(&e), n),
    }
}
