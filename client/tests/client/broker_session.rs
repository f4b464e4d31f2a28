//! Brokers and observers against three in-process nodes (RaftDriver + ControllerService +
//! RpcServer each, real logs in temporary directories, one glommio executor thread): a
//! `MetadataFollower` following the log with long-poll Fetch across a leader change, and
//! `BrokerSession`s registering, staying fenced until caught up, and heartbeating. Conditions
//! are polled with a deadline, never waited for with a fixed sleep.

use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_client::{
    BrokerSession, ClientError, ControllerClient, ListenerV1, MetadataFollower, TargetState,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_raft::ReplicaKey;
use corum_types::{LogOffset, NodeId, Uuid};

use crate::common::{client_config, cluster, heartbeat, on_executor, stop_all, wait_for};

const TEST_DEADLINE: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(10);

fn broker_resource(id: u32) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: id.to_string(),
    }
}

/// Whether the follower's image shows broker `id` fenced (`None`: not registered there).
fn fenced(follower: &MetadataFollower, id: u32) -> Option<bool> {
    follower.image().brokers.get(NodeId(id)).map(|b| b.fenced)
}

fn observer(id: u32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid([id as u8; 16]),
    }
}

fn listeners(port: u16) -> Vec<ListenerV1> {
    vec![ListenerV1 {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }]
}

/// The follower's image holds a config written through the client (and the registration of a
/// broker), both before and after the leader stops; it never applies beyond the high
/// watermark it was told.
#[test]
fn the_follower_image_follows_writes_across_a_leader_change() {
    on_executor("client-follower", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, l) = cluster(tmp.path(), false).await;
        let client = ControllerClient::connect(client_config(&nodes, &[0, 1, 2]))
            .await
            .unwrap();
        client
            .alter_config(broker_resource(7), "log.retention.ms", "12345")
            .await
            .unwrap();
        let follower =
            MetadataFollower::start(client.clone(), observer(100), Duration::from_millis(200));
        let value = |f: &MetadataFollower, v: &str| {
            f.image()
                .configs
                .value(&broker_resource(7), "log.retention.ms")
                == Some(v)
        };
        wait_for("the follower to apply the first config", || {
            value(&follower, "12345")
        })
        .await;
        assert!(follower.next_offset() <= follower.high_watermark());
        assert!(follower.image().end_offset <= follower.next_offset());

        let old = nodes.remove(l);
        old.stop().await;
        client
            .alter_config(broker_resource(7), "log.retention.ms", "67890")
            .await
            .unwrap();
        wait_for("the follower to apply the second config", || {
            value(&follower, "67890")
        })
        .await;
        assert!(follower.failure().is_none());
        assert!(follower.leader_epoch().0 >= 2);
        assert!(follower.next_offset() <= follower.high_watermark());
        follower.stop();
        stop_all(nodes).await;
    });
}

/// A broker registers FENCED and is unfenced only once the offset it reports has passed its
/// registration record: a heartbeat reporting offset 0 stays FENCED, while the session fed
/// by its follower turns ACTIVE with the follower past the registration; heartbeats then keep
/// it ACTIVE, and a second broker sharing the follower registers with a later epoch.
#[test]
fn a_broker_is_unfenced_once_its_follower_caught_up() {
    on_executor("client-broker", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, _) = cluster(tmp.path(), false).await;
        let client = ControllerClient::connect(client_config(&nodes, &[0, 1, 2]))
            .await
            .unwrap();

        // A broker that never catches up (it reports offset 0) stays fenced.
        let lagging = match client
            .call(heartbeat(50, None, LogOffset(0)))
            .await
            .unwrap()
        {
            corum_client::ResponseBody::BrokerHeartbeat(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(lagging.target_state, TargetState::Fenced);
        for _ in 0..3 {
            match client
                .call(heartbeat(50, Some(lagging.broker_epoch), LogOffset(0)))
                .await
                .unwrap()
            {
                corum_client::ResponseBody::BrokerHeartbeat(r) => {
                    assert_eq!(r.target_state, TargetState::Fenced);
                    assert!(!r.is_caught_up);
                }
                other => panic!("{other:?}"),
            }
        }

        let follower = Rc::new(MetadataFollower::start(
            client.clone(),
            observer(100),
            Duration::from_millis(200),
        ));
        let mut session = BrokerSession::register(
            client.clone(),
            NodeId(100),
            Uuid([0x10; 16]),
            listeners(9092),
            follower.clone(),
        )
        .await
        .unwrap();
        assert_eq!(session.state(), TargetState::Fenced);
        assert_eq!(session.registrations(), 1);
        let epoch = session.broker_epoch();
        let started = Instant::now();
        let took = session
            .run_until_unfenced(Duration::from_millis(500), WAIT)
            .await
            .unwrap();
        assert_eq!(session.state(), TargetState::Active);
        assert!(follower.next_offset().0 > epoch.0);
        assert!(took >= started.elapsed().saturating_sub(Duration::from_secs(1)));
        for _ in 0..3 {
            assert_eq!(session.heartbeat().await.unwrap(), TargetState::Active);
        }
        assert_eq!(session.broker_epoch(), epoch);

        // The follower's image shows the broker registered and then unfenced.
        let hwm = follower.high_watermark();
        wait_for("the follower to see the unfencing", || {
            fenced(&follower, 100) == Some(false)
        })
        .await;
        assert!(follower.next_offset() >= hwm);

        let mut second = BrokerSession::register(
            client.clone(),
            NodeId(101),
            Uuid([0x11; 16]),
            listeners(9093),
            follower.clone(),
        )
        .await
        .unwrap();
        assert!(second.broker_epoch() > epoch);
        second
            .run_until_unfenced(Duration::from_millis(500), WAIT)
            .await
            .unwrap();

        // The lagging broker is still fenced; the same id from another incarnation is refused.
        let dup = BrokerSession::register(
            client.clone(),
            NodeId(100),
            Uuid([0x99; 16]),
            listeners(9094),
            follower.clone(),
        )
        .await;
        assert!(
            matches!(
                dup,
                Err(ClientError::Rpc(corum_client::RpcError::Api(
                    corum_controller::ApiError::DuplicateBrokerRegistration { .. }
                )))
            ),
            "{:?}",
            dup.err()
        );
        let cluster_view = client.describe_cluster().await.unwrap();
        let fenced: Vec<_> = cluster_view
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.fenced))
            .collect();
        assert_eq!(fenced, vec![(50, true), (100, false), (101, false)]);

        // Controlled shutdown of a broker that leads nothing answers SHUTDOWN.
        second
            .controlled_shutdown(Duration::from_millis(50), WAIT)
            .await
            .unwrap();
        drop(session);
        drop(second);
        drop(follower);
        stop_all(nodes).await;
    });
}

/// A broker that stops heartbeating is fenced when its lease expires; its next heartbeat, of
/// the same epoch, is accepted (as Kafka's controller accepts it) and unfences it again once
/// its follower is past the registration: no new registration, no new epoch.
#[test]
fn a_broker_whose_lease_expired_is_unfenced_again_with_its_epoch() {
    on_executor("client-lease", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let controller = corum_controller::ControllerConfig {
            session_timeout_ms: 400,
            heartbeat_interval_ms: 100,
            ..corum_controller::ControllerConfig::default()
        };
        let (nodes, _) = crate::common::cluster_with(tmp.path(), false, controller).await;
        let client = ControllerClient::connect(client_config(&nodes, &[0, 1, 2]))
            .await
            .unwrap();
        let follower = Rc::new(MetadataFollower::start(
            client.clone(),
            observer(200),
            Duration::from_millis(200),
        ));
        let mut session = BrokerSession::register(
            client.clone(),
            NodeId(200),
            Uuid([0x20; 16]),
            listeners(9092),
            follower.clone(),
        )
        .await
        .unwrap();
        session
            .run_until_unfenced(Duration::from_millis(100), WAIT)
            .await
            .unwrap();
        assert_eq!(session.lease_duration(), Duration::from_millis(400));
        let first = session.broker_epoch();
        // The answer leaves at the commit; the follower applies the unfencing right after.
        wait_for("the follower to see the broker unfenced", || {
            fenced(&follower, 200) == Some(false)
        })
        .await;
        // No heartbeats: the controller's tick fences the broker once the lease runs out.
        wait_for("the broker to be fenced", || {
            fenced(&follower, 200) == Some(true)
        })
        .await;
        assert_eq!(session.heartbeat().await.unwrap(), TargetState::Active);
        assert_eq!(session.registrations(), 1);
        assert_eq!(session.broker_epoch(), first);
        wait_for("the follower to see the broker unfenced again", || {
            fenced(&follower, 200) == Some(false)
        })
        .await;
        // The registration carried one log directory.
        assert_eq!(
            follower
                .image()
                .brokers
                .get(NodeId(200))
                .map(|b| b.log_dirs.len()),
            Some(1)
        );
        drop(session);
        drop(follower);
        stop_all(nodes).await;
    });
}
