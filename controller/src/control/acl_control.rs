//! CreateAcls, DeleteAcls and DescribeAcls (Kafka's `AclControlManager`): ACLs become
//! AccessControlEntry records under ids drawn from the request's deterministic generator, and
//! RemoveAccessControlEntry records; DescribeAcls reads the image.
//!
//! | request | checks (INVALID_REQUEST with the reason) | records |
//! |---|---|---|
//! | CreateAcls, per ACL | [`AclBinding::validate`] | one AccessControlEntry per ACL not already in the image or earlier in the request (an ACL created twice succeeds once) |
//! | DeleteAcls, per filter | [`AclFilter::validate`] (ANY and MATCH allowed) | one RemoveAccessControlEntry per matching ACL not removed by an earlier filter; the answer lists them |
//! | DescribeAcls | [`AclFilter::validate`] | none: the matching ACLs |
//!
//! A request that would write more than `records_per_batch_max` records is refused whole
//! (TooManyRecords), as Kafka refuses more than its `MAX_RECORDS_PER_USER_OP`.

use std::collections::HashSet;

use corum_types::Uuid;
use rand::RngCore;

use super::replication_control::request_rng;
use super::{ControllerResult, RequestContext, View};
use crate::acl::{AclBinding, AclBindingV1, AclFilter, AclFilterV1, AclsImage};
use crate::error::ApiError;
use crate::records::{MetadataRecord, RemoveAccessControlEntryRecordV1};

/// ACLs to create (Kafka's CreateAcls).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct CreateAclsRequest {
    pub creations: Vec<AclBindingV1>,
}

/// One result per creation, in order.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct CreateAclsResponse {
    pub results: Vec<Result<(), ApiError>>,
}

/// Filters of ACLs to delete (Kafka's DeleteAcls).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DeleteAclsRequest {
    pub filters: Vec<AclFilterV1>,
}

/// One result per filter, in order: the ACLs it removed.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DeleteAclsResponse {
    pub results: Vec<Result<Vec<AclBindingV1>, ApiError>>,
}

/// The ACLs passing one filter (Kafka's DescribeAcls).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeAclsRequest {
    pub filter: AclFilterV1,
}

/// The matching ACLs, in id order.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DescribeAclsResponse {
    pub acls: Vec<AclBindingV1>,
}

fn invalid(reason: crate::acl::Invalid) -> ApiError {
    ApiError::InvalidRequest { reason }
}

fn too_many(records: usize, max: usize) -> Result<(), ApiError> {
    if records > max {
        return Err(ApiError::TooManyRecords { records, max });
    }
    Ok(())
}

fn new_acl_id(rng: &mut impl RngCore, acls: &AclsImage, taken: &HashSet<Uuid>) -> Uuid {
    loop {
        let bits = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let id = Uuid::from_random_bits(bits);
        if !acls.contains_id(id) && !taken.contains(&id) {
            return id;
        }
    }
}

pub(crate) fn create_acls(
    view: View<'_>,
    req: &CreateAclsRequest,
    ctx: &RequestContext,
) -> Result<ControllerResult<CreateAclsResponse>, ApiError> {
    too_many(req.creations.len(), view.config.records_per_batch_max)?;
    let mut rng = request_rng(view.config.seed, ctx);
    let acls = &view.image.acls;
    let mut records = Vec::new();
    let mut created: HashSet<AclBinding> = HashSet::new();
    let mut ids = HashSet::new();
    let results = req
        .creations
        .iter()
        .map(|raw| {
            let acl = AclBinding::validate(raw).map_err(invalid)?;
            if acls.find(&acl).is_none() && !created.contains(&acl) {
                let id = new_acl_id(&mut rng, acls, &ids);
                ids.insert(id);
                records.push(MetadataRecord::AccessControlEntry(acl.to_record(id)));
                created.insert(acl);
            }
            Ok(())
        })
        .collect();
    Ok(ControllerResult::new(
        records,
        CreateAclsResponse { results },
    ))
}

pub(crate) fn delete_acls(
    view: View<'_>,
    req: &DeleteAclsRequest,
) -> Result<ControllerResult<DeleteAclsResponse>, ApiError> {
    let mut removed: HashSet<Uuid> = HashSet::new();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.filters.len());
    for raw in &req.filters {
        let filter = match AclFilter::validate(raw) {
            Ok(f) => f,
            Err(reason) => {
                results.push(Err(invalid(reason)));
                continue;
            }
        };
        let mut deleted = Vec::new();
        for (id, acl) in view.image.acls.matching(&filter) {
            if removed.insert(id) {
                records.push(MetadataRecord::RemoveAccessControlEntry(
                    RemoveAccessControlEntryRecordV1 { id },
                ));
                deleted.push(acl.to_raw());
            }
        }
        results.push(Ok(deleted));
    }
    too_many(records.len(), view.config.records_per_batch_max)?;
    Ok(ControllerResult::new(
        records,
        DeleteAclsResponse { results },
    ))
}

/// The ACLs of `acls` passing the request's filter.
pub(crate) fn describe_acls(
    acls: &AclsImage,
    req: &DescribeAclsRequest,
) -> Result<DescribeAclsResponse, ApiError> {
    let filter = AclFilter::validate(&req.filter).map_err(invalid)?;
    Ok(DescribeAclsResponse {
        acls: acls.matching(&filter).map(|(_, a)| a.to_raw()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{codes, AclOperation, AclPermissionType, PatternType, ResourceType};
    use crate::control::test_harness::Harness;
    use crate::{decode_batch, encode_batch, Controller, ControllerConfig, MetadataImage};
    use corum_types::{LogOffset, NodeId};

    fn binding(name: &str, pattern: PatternType, who: &str, op: AclOperation) -> AclBindingV1 {
        AclBindingV1 {
            resource_type: ResourceType::Topic.code(),
            resource_name: name.into(),
            pattern_type: pattern.code(),
            principal: who.into(),
            host: "*".into(),
            operation: op.code(),
            permission_type: AclPermissionType::Allow.code(),
        }
    }

    fn any_filter() -> AclFilterV1 {
        AclFilterV1 {
            resource_type: codes::ANY,
            resource_name: None,
            pattern_type: codes::ANY,
            principal: None,
            host: None,
            operation: codes::ANY,
            permission_type: codes::ANY,
        }
    }

    fn describe(h: &Harness, filter: AclFilterV1) -> Vec<AclBindingV1> {
        h.c.describe_acls(&DescribeAclsRequest { filter })
            .unwrap()
            .acls
    }

    /// Creations write one record per new ACL (duplicates succeed without one), invalid ones
    /// get INVALID_REQUEST, ids are deterministic, and the ACLs replay into the image.
    #[test]
    fn create_validates_dedups_and_replays() {
        let mut h = Harness::new();
        let a = binding(
            "orders",
            PatternType::Literal,
            "User:alice",
            AclOperation::Read,
        );
        let mut bad = a.clone();
        bad.pattern_type = codes::MATCH;
        let req = CreateAclsRequest {
            creations: vec![a.clone(), bad, a.clone()],
        };
        let ctx = h.ctx();
        let r = h.c.create_acls(&req, &ctx).unwrap();
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.response.results.len(), 3);
        assert!(r.response.results[0].is_ok() && r.response.results[2].is_ok());
        assert!(matches!(
            r.response.results[1],
            Err(ApiError::InvalidRequest { .. })
        ));
        // The same request at the same offset draws the same id.
        assert_eq!(h.c.create_acls(&req, &ctx).unwrap().records, r.records);
        h.run(Ok(r));
        assert_eq!(describe(&h, any_filter()), vec![a.clone()]);
        // Created again: success, nothing written.
        let ctx = h.ctx();
        let again =
            h.c.create_acls(&CreateAclsRequest { creations: vec![a] }, &ctx)
                .unwrap();
        assert!(again.records.is_empty());
        assert_eq!(again.response.results, vec![Ok(())]);
    }

    /// One filter may remove many ACLs; a later filter does not remove them twice; MATCH
    /// finds literal, wildcard and prefixed ACLs that apply to a name.
    #[test]
    fn delete_filters_remove_every_match() {
        let mut h = Harness::new();
        let acls = vec![
            binding("orders", PatternType::Literal, "User:a", AclOperation::Read),
            binding("ord", PatternType::Prefixed, "User:b", AclOperation::Write),
            binding("*", PatternType::Literal, "User:c", AclOperation::Describe),
            binding("other", PatternType::Literal, "User:a", AclOperation::Read),
        ];
        let ctx = h.ctx();
        let r = h.c.create_acls(
            &CreateAclsRequest {
                creations: acls.clone(),
            },
            &ctx,
        );
        h.run(r);
        let mut matching = any_filter();
        matching.resource_type = ResourceType::Topic.code();
        matching.resource_name = Some("orders".into());
        matching.pattern_type = codes::MATCH;
        let mut unknown = any_filter();
        unknown.operation = codes::UNKNOWN;
        let r =
            h.c.delete_acls(&DeleteAclsRequest {
                filters: vec![matching.clone(), any_filter(), unknown],
            })
            .unwrap();
        assert_eq!(r.records.len(), 4);
        let [first, second, third] = &r.response.results[..] else {
            panic!("three results")
        };
        assert_eq!(first.as_ref().unwrap().len(), 3);
        assert_eq!(second.as_ref().unwrap(), &vec![acls[3].clone()]);
        assert!(matches!(third, Err(ApiError::InvalidRequest { .. })));
        h.run(Ok(r));
        assert!(describe(&h, any_filter()).is_empty());
        assert!(h.c.image().acls.is_empty());
    }

    /// ACLs survive a snapshot: the snapshot's records rebuild the same ACL image, and a
    /// replay of records naming a bad code, a used id or a missing one is refused.
    #[test]
    fn snapshot_round_trip_and_replay_checks() {
        let mut h = Harness::new();
        let creations: Vec<AclBindingV1> = (0..50)
            .map(|i| {
                binding(
                    &format!("t{i}"),
                    if i % 3 == 0 {
                        PatternType::Prefixed
                    } else {
                        PatternType::Literal
                    },
                    &format!("User:u{}", i % 7),
                    AclOperation::Read,
                )
            })
            .collect();
        let ctx = h.ctx();
        let r = h.c.create_acls(&CreateAclsRequest { creations }, &ctx);
        h.run(r);
        let image = h.c.committed_image().clone();
        let snap = encode_batch(&image.snapshot_records());
        let back =
            MetadataImage::from_snapshot(image.end_offset, decode_batch(&snap).unwrap()).unwrap();
        assert_eq!(back.acls, image.acls);
        assert_eq!(back.acls.len(), 50);

        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        let (id, acl) = image.acls.iter().next().unwrap();
        let good = MetadataRecord::AccessControlEntry(acl.to_record(id));
        let replay = |c: &mut Controller, at: u64, r: &MetadataRecord| {
            c.replay_batch(
                LogOffset(at),
                decode_batch(&encode_batch(std::slice::from_ref(r))).unwrap(),
            )
        };
        replay(&mut c, 0, &good).unwrap();
        assert!(replay(&mut c, 1, &good).is_err(), "the same id twice");
        let mut bad = acl.to_record(Uuid([9; 16]));
        bad.operation = codes::ANY;
        assert!(replay(&mut c, 1, &MetadataRecord::AccessControlEntry(bad)).is_err());
        let gone = MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecordV1 {
            id: Uuid([9; 16]),
        });
        assert!(replay(&mut c, 1, &gone).is_err(), "no such ACL");
        let remove =
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecordV1 { id });
        replay(&mut c, 1, &remove).unwrap();
        assert!(c.committed_image().acls.is_empty());
    }
}
