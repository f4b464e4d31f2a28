//! `kraft.version`: the one feature Raft keeps rather than the controller's image (KIP-853).
//!
//! Kafka's `kafka-features upgrade --feature kraft.version=1` (and `corum features upgrade`)
//! sends UpdateFeatures like for any feature; the controller's image has no record of it, so
//! both of the node's edges (the RPC server and the Kafka listener's backend) split the request
//! here: `kraft.version` goes to the leader's Raft core
//! ([`corum_raft::RaftCore::upgrade_kraft_version`], through [`RaftHandle::voter_change`]),
//! every other feature to the controller, and the answers are put back in the request's order.
//! DescribeFeatures answers get the feature added the same way ([`add_kraft_version`]).
//!
//! | `kraft.version` update | answer |
//! |---|---|
//! | to the version in force | success, nothing written |
//! | below it (0 removes the feature: a downgrade too) | `FeatureLevelOutOfRange`: it never goes down |
//! | above [`KRAFT_VERSION_MAX`] | `FeatureLevelOutOfRange` |
//! | 0 → 1 | the leader writes KRaftVersion 1 and the voters with their directory ids; success once committed; refusals (a voter not heard from, a voter change pending, ...) name the reason |
//! | `validate_only` | the same checks, nothing written |
//!
//! Features are independent, as the controller treats them: a refused `kraft.version` does not
//! undo another feature of the same request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use corum_controller::control::feature_control::{
    DescribeFeaturesResponse, FeatureUpdate, FinalizedFeatureLevel, UpdateFeaturesRequest,
    UpdateFeaturesResponse,
};
use corum_controller::error::ApiError;
use corum_controller::records::SupportedFeatureV1;
use corum_raft::control::KRAFT_VERSION_MAX;
use corum_raft::message::UpgradeKraftVersionRequest;
use corum_raft::{Message, VoterChangeError};

use crate::dispatch::raft_request_timeout_ms;
use crate::driver::{CallAnswer, RaftHandle};
use crate::protocol::{RequestBody, RequestFrame, ResponseBody, RpcError};

/// The feature's name, as Kafka's tools spell it.
pub const KRAFT_VERSION: &str = "kraft.version";

/// Serves `body` for either edge of the node: a call into this node's controller service
/// ([`RaftHandle::call`], as request `correlation_id` with `timeout_ms`), except an
/// UpdateFeatures naming `kraft.version`, which [`update_features`] splits; a DescribeFeatures
/// answer gains the feature ([`add_kraft_version`]). `timeout_ms` (0 for the default,
/// [`raft_request_timeout_ms`]) also bounds the wait for an upgrade to commit; `hint` names a
/// leader in a `NotController` of the split request.
///
/// The call leaves at once; the answer is a small named future, and the upgrade's (a rare
/// request, with a larger future) is boxed, so that the task of every request of either edge
/// stays small (`rpc_server::answer_request`).
pub fn call<'a>(
    raft: &'a RaftHandle,
    body: RequestBody,
    correlation_id: u64,
    timeout_ms: u32,
    hint: impl Fn(corum_types::NodeId) -> Option<crate::protocol::LeaderHint> + 'a,
) -> FeaturesCall<'a> {
    match body {
        RequestBody::UpdateFeatures(req) if names_kraft_version(&req) => {
            FeaturesCall::Upgrade(Box::pin(update_features(
                raft,
                req,
                raft_request_timeout_ms(timeout_ms),
                hint,
                move |rest| {
                    let answer = raft.call(RequestFrame {
                        correlation_id,
                        timeout_ms,
                        body: RequestBody::UpdateFeatures(rest),
                    });
                    async move { answer.await.body }
                },
            )))
        }
        body => FeaturesCall::Direct {
            raft,
            answer: raft.call(RequestFrame {
                correlation_id,
                timeout_ms,
                body,
            }),
        },
    }
}

/// The answer of a [`call`].
pub enum FeaturesCall<'a> {
    /// The controller's answer, completed by [`add_kraft_version`].
    Direct {
        raft: &'a RaftHandle,
        answer: CallAnswer,
    },
    /// A `kraft.version` upgrade, split by [`update_features`].
    Upgrade(Pin<Box<dyn Future<Output = Result<ResponseBody, RpcError>> + 'a>>),
}

impl Future for FeaturesCall<'_> {
    type Output = Result<ResponseBody, RpcError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            FeaturesCall::Direct { raft, answer } => {
                let mut answer = std::task::ready!(Pin::new(answer).poll(cx)).body;
                if let Ok(ResponseBody::DescribeFeatures(f)) = &mut answer {
                    add_kraft_version(f, raft.kraft_version());
                }
                Poll::Ready(answer)
            }
            FeaturesCall::Upgrade(upgrade) => upgrade.as_mut().poll(cx),
        }
    }
}

/// Whether `req` names `kraft.version` ([`update_features`] serves it).
fn names_kraft_version(req: &UpdateFeaturesRequest) -> bool {
    req.updates.iter().any(|u| u.name == KRAFT_VERSION)
}

/// Adds `kraft.version` to a DescribeFeatures answer: supported from 0 to
/// [`KRAFT_VERSION_MAX`], finalized at `kraft_version` when above 0 (Kafka lists no level 0).
fn add_kraft_version(f: &mut DescribeFeaturesResponse, kraft_version: u16) {
    f.supported.retain(|s| s.name != KRAFT_VERSION);
    f.supported.push(SupportedFeatureV1 {
        name: KRAFT_VERSION.to_owned(),
        min_level: 0,
        max_level: KRAFT_VERSION_MAX,
    });
    f.supported.sort_by(|a, b| a.name.cmp(&b.name));
    f.finalized.retain(|s| s.name != KRAFT_VERSION);
    if kraft_version > 0 {
        f.finalized.push(FinalizedFeatureLevel {
            name: KRAFT_VERSION.to_owned(),
            min_level: kraft_version,
            max_level: kraft_version,
        });
        f.finalized.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// Serves an UpdateFeatures that names `kraft.version` (see the module doc): the other
/// features through `rest` (the controller), `kraft.version` through this node's Raft core,
/// which must lead (else `NotController`, with the leader named by `hint`). Waits at most
/// `timeout_ms` for the upgrade to commit.
async fn update_features<F, Fut>(
    raft: &RaftHandle,
    req: UpdateFeaturesRequest,
    timeout_ms: u64,
    hint: impl Fn(corum_types::NodeId) -> Option<crate::protocol::LeaderHint>,
    rest: F,
) -> Result<ResponseBody, RpcError>
where
    F: FnOnce(UpdateFeaturesRequest) -> Fut,
    Fut: Future<Output = Result<ResponseBody, RpcError>>,
{
    let (role, _, leader, _) = raft.leadership();
    if role != corum_raft::Role::Leader {
        return Err(RpcError::NotController {
            leader: leader.and_then(hint),
        });
    }
    let mut kraft: Vec<(usize, FeatureUpdate)> = Vec::new();
    let mut others = Vec::new();
    for (i, u) in req.updates.into_iter().enumerate() {
        if u.name == KRAFT_VERSION {
            kraft.push((i, u));
        } else {
            others.push((i, u));
        }
    }
    let mut results: Vec<Option<(String, Result<(), ApiError>)>> =
        vec![None; kraft.len() + others.len()];
    if !others.is_empty() {
        let (at, updates): (Vec<usize>, Vec<FeatureUpdate>) = others.into_iter().unzip();
        let answer = rest(UpdateFeaturesRequest {
            updates,
            validate_only: req.validate_only,
        })
        .await?;
        let ResponseBody::UpdateFeatures(r) = answer else {
            return Err(RpcError::Internal {
                reason: "the controller answered UpdateFeatures with another body".into(),
            });
        };
        for (i, result) in at.into_iter().zip(r.results) {
            results[i] = Some(result);
        }
    }
    for (n, (i, u)) in kraft.into_iter().enumerate() {
        let result = if n > 0 {
            Err(ApiError::InvalidRequest {
                reason: "feature named more than once in the request".into(),
            })
        } else {
            upgrade(
                raft,
                &u,
                req.validate_only,
                raft.kraft_version(),
                timeout_ms,
            )
            .await
        };
        results[i] = Some((u.name, result));
    }
    Ok(ResponseBody::UpdateFeatures(UpdateFeaturesResponse {
        results: results
            .into_iter()
            .map(|r| r.expect("every update answered"))
            .collect(),
    }))
}

async fn upgrade(
    raft: &RaftHandle,
    u: &FeatureUpdate,
    validate_only: bool,
    in_force: u16,
    timeout_ms: u64,
) -> Result<(), ApiError> {
    let refused = |reason: String| ApiError::FeatureLevelOutOfRange {
        feature: KRAFT_VERSION.to_owned(),
        min_level: u.min_level,
        max_level: u.max_level,
        reason,
    };
    if u.max_level < in_force {
        return Err(refused(format!(
            "kraft.version is {in_force} and never goes down"
        )));
    }
    let message = Message::UpgradeKraftVersion(UpgradeKraftVersionRequest {
        request_id: 0,
        version: u.max_level,
        validate_only,
    });
    match raft.voter_change_within(message, timeout_ms).await {
        None => Err(refused(format!(
            "no answer within {timeout_ms} ms: the upgrade may still commit (describe the \
             features to see)"
        ))),
        Some(Err(_))
        | Some(Ok(corum_raft::message::VoterChangeResponse {
            result: Err(VoterChangeError::NotLeader | VoterChangeError::LeadershipLost),
            ..
        })) => Err(ApiError::NotController),
        Some(Ok(r)) => r.result.map_err(|e| refused(reason(e).into())),
    }
}

/// Why the leader refused the upgrade.
fn reason(e: VoterChangeError) -> &'static str {
    match e {
        VoterChangeError::UnsupportedKraftVersion => {
            "this build supports kraft.version 0 and 1 only"
        }
        VoterChangeError::DirectoryIdsUnknown => {
            "not every voter has answered the leader with its directory id within the fetch \
             timeout: every voter must be running; retry shortly"
        }
        VoterChangeError::ChangePending => {
            "a voter change has not committed yet; retry once it has"
        }
        VoterChangeError::EpochNotCommitted => {
            "the leader has not committed an entry of its epoch yet; retry shortly"
        }
        VoterChangeError::NotLeader
        | VoterChangeError::LeadershipLost
        | VoterChangeError::AlreadyVoter
        | VoterChangeError::NotVoter
        | VoterChangeError::NotCaughtUp
        | VoterChangeError::WouldBeEmpty
        | VoterChangeError::StaticQuorum => "the leader refused it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DescribeFeatures gains `kraft.version`: always supported 0..=1, finalized only at 1.
    #[test]
    fn describe_features_names_kraft_version() {
        let base = DescribeFeaturesResponse {
            finalized: vec![FinalizedFeatureLevel {
                name: "metadata.version".into(),
                min_level: 27,
                max_level: 27,
            }],
            finalized_epoch: None,
            supported: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 7,
                max_level: 27,
            }],
        };
        let mut f = base.clone();
        add_kraft_version(&mut f, 0);
        assert_eq!(
            f.supported
                .iter()
                .map(|s| (s.name.as_str(), s.min_level, s.max_level))
                .collect::<Vec<_>>(),
            [("kraft.version", 0, 1), ("metadata.version", 7, 27)]
        );
        assert_eq!(f.finalized.len(), 1);
        let mut f = base;
        add_kraft_version(&mut f, 1);
        add_kraft_version(&mut f, 1);
        assert_eq!(
            f.finalized
                .iter()
                .map(|s| (s.name.as_str(), s.max_level))
                .collect::<Vec<_>>(),
            [("kraft.version", 1), ("metadata.version", 27)]
        );
        assert_eq!(f.supported.len(), 2, "added once");
    }

    #[test]
    fn only_update_features_naming_it_are_split() {
        let update = |names: &[&str]| UpdateFeaturesRequest {
            updates: names
                .iter()
                .map(|name| FeatureUpdate {
                    name: (*name).into(),
                    min_level: 1,
                    max_level: 1,
                    allow_downgrade: false,
                })
                .collect(),
            validate_only: false,
        };
        assert!(names_kraft_version(&update(&["kraft.version"])));
        assert!(names_kraft_version(&update(&[
            "metadata.version",
            "kraft.version"
        ])));
        assert!(!names_kraft_version(&update(&["metadata.version"])));
    }
}
