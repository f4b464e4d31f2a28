//! Where Kafka clients reach the nodes: the controllers' endpoints on the listener a request
//! came in on (from their registrations, KIP-919), the brokers' endpoints, and which node to
//! name as the controller.

use corum_controller::control::cluster_control::DescribedBroker;
use corum_protocol::{LocalRead, ResponseBody};

use crate::backend::{Backend, ListenerContext};
use crate::service::{call, read};

/// One node as Metadata and DescribeCluster list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// The controllers a client of this listener can reach: each registered controller's
/// endpoint of the listener's name, and this node's own advertised endpoint when its
/// registration is not committed yet (so a client always has one node to talk to). Sorted by
/// id.
pub async fn controllers<B: Backend>(ctx: &ListenerContext, backend: &B) -> Vec<NodeEndpoint> {
    let registered = call(
        backend,
        read(LocalRead::DescribeControllers),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeControllers(r) => Some(r.controllers),
            _ => None,
        },
    )
    .await
    .unwrap_or_else(|e| {
        tracing::debug!(error = %e, "cannot list the controllers; naming this node only");
        Vec::new()
    });
    let mut out: Vec<NodeEndpoint> = registered
        .iter()
        .filter_map(|c| {
            let e = c
                .end_points
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(&ctx.listener_name))?;
            Some(NodeEndpoint {
                id: c.controller_id.0 as i32,
                host: e.host.clone(),
                port: i32::from(e.port),
                rack: None,
                fenced: false,
            })
        })
        .collect();
    // This node knows its own listener best (a restart may have moved it).
    let own = own_endpoint(ctx);
    match out.iter_mut().find(|n| n.id == own.id) {
        Some(n) => *n = own,
        None => out.push(own),
    }
    out.sort_by_key(|n| n.id);
    out
}

/// This node's endpoint on the listener, as it advertises it.
pub fn own_endpoint(ctx: &ListenerContext) -> NodeEndpoint {
    NodeEndpoint {
        id: ctx.node_id.0 as i32,
        host: ctx.advertised_host.clone(),
        port: i32::from(ctx.advertised_port),
        rack: None,
        fenced: false,
    }
}

/// The controller to name: the active one when clients can reach it, else this node (which
/// forwards what it cannot serve).
pub fn controller_id<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    controllers: &[NodeEndpoint],
) -> i32 {
    match backend.leader() {
        Some(leader) if controllers.iter().any(|c| c.id == leader.0 as i32) => leader.0 as i32,
        _ => ctx.node_id.0 as i32,
    }
}

/// A registered broker's endpoint for this listener: the one of the same name, else its
/// first (corum's brokers may name their listeners differently from the controllers').
pub fn broker(ctx: &ListenerContext, b: &DescribedBroker) -> Option<NodeEndpoint> {
    let e = b
        .listeners
        .iter()
        .find(|l| l.name.eq_ignore_ascii_case(&ctx.listener_name))
        .or_else(|| b.listeners.first())?;
    Some(NodeEndpoint {
        id: b.broker_id.0 as i32,
        host: e.host.clone(),
        port: i32::from(e.port),
        rack: b.rack.clone(),
        fenced: b.fenced,
    })
}

/// Brokers and controllers in one list for Metadata: a broker whose id a controller also
/// uses is listed once, as the controller (clients must reach the controller they are told
/// about). Sorted by id.
pub fn merged(brokers: Vec<NodeEndpoint>, controllers: &[NodeEndpoint]) -> Vec<NodeEndpoint> {
    let mut out: Vec<NodeEndpoint> = brokers
        .into_iter()
        .filter(|b| !controllers.iter().any(|c| c.id == b.id))
        .collect();
    out.extend(controllers.iter().cloned());
    out.sort_by_key(|n| n.id);
    out
}
