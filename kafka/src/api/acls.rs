//! DescribeAcls, CreateAcls and DeleteAcls, answered as a Kafka cluster without an authorizer
//! answers them: SECURITY_DISABLED (54). corum has no authorizer yet (ACLs arrive with the
//! security work); until then these say so, rather than closing the connection, and clients
//! that read a server's version from the APIs it lists (kafka-python) see a current server.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsResponse,
};

use super::text;

const REASON: &str = "no authorizer is configured: corum does not enforce ACLs yet";

fn disabled() -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    (ResponseError::SecurityDisabled.code(), Some(text(REASON)))
}

pub fn describe_acls() -> DescribeAclsResponse {
    let (code, message) = disabled();
    DescribeAclsResponse::default()
        .with_error_code(code)
        .with_error_message(message)
}

/// One SECURITY_DISABLED result per ACL asked for.
pub fn create_acls(request: &CreateAclsRequest) -> CreateAclsResponse {
    let (code, message) = disabled();
    CreateAclsResponse::default().with_results(
        request
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(message.clone())
            })
            .collect(),
    )
}

/// One SECURITY_DISABLED result per filter.
pub fn delete_acls(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let (code, message) = disabled();
    DeleteAclsResponse::default().with_filter_results(
        request
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code)
                    .with_error_message(message.clone())
            })
            .collect(),
    )
}
