//! The controller service: the [`Controller`] state machine on the committed stream of a Raft
//! replica, serving requests while this node is the active controller.
//!
//! Its policy is [`core::ServiceCore`], a deterministic state machine (read its doc for what
//! each input does). [`ControllerService::run`] is the thin async shell around it: it reads
//! the port ([`crate::port`]), feeds the core each message and the clock (the controller's
//! tick every `controller_tick_interval_ms`), and sends what the core produced; it encodes a
//! due snapshot on a blocking thread and offers it to the driver. It holds no caller: every
//! answer goes to the driver's call table ([`crate::calls`]) on the connections' shard.
//!
//! The service runs alone on the controller shard, or on the driver's shard when the node has
//! one core; the port is the only difference.

pub mod core;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::Controller;
use corum_raft::Payload;
use corum_runtime::ShutdownSignal;
use corum_types::{LogOffset, NodeId};
use futures_lite::future::or;

use crate::error::ServiceError;
use crate::port::{ServiceEnd, ToDriver, ToService, ITEMS_PER_MESSAGE_MAX};
use crate::protocol::LeaderHint;

use self::core::ServiceCore;

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// Settings of a [`ControllerService`], derived from the node's configuration by
/// [`crate::config::components::controller_service`].
#[derive(Clone, Debug)]
pub struct ControllerServiceConfig {
    /// This node (to recognise its own leadership in the driver's status).
    pub node_id: NodeId,
    /// Where each initial voter serves requests, for the leader hint of `NotController` when
    /// the voter set in the driver's status does not hold the leader (that set names voters
    /// added or moved later).
    pub leader_endpoints: Vec<LeaderHint>,
    /// The listener of a voter's endpoints that hints name (`controller.listener.names`' first).
    pub controller_listener_name: String,
    /// Period of the controller's `tick` while active (lease expiry, fencing).
    pub controller_tick_interval_ms: u64,
    /// Most records and payload bytes of one proposal: requests that arrive together are
    /// proposed as one batch up to these limits.
    pub batch_records_max: usize,
    pub batch_bytes_max: usize,
    /// Most requests taken from the queue for one batch.
    pub batch_requests_max: usize,
    /// Payload bytes of committed data batches replayed since the last snapshot that make the
    /// service offer the driver a new one (`metadata.log.max.record.bytes.between.snapshots`;
    /// 0: never).
    pub snapshot_bytes_between: u64,
    /// The active controller appends a NoOp record when it has proposed nothing for this long
    /// (`metadata.max.idle.interval.ms`; 0: never), so observers see the high watermark move
    /// and can tell a live controller from a silent one. Resolves to the tick interval.
    pub idle_noop_interval_ms: u64,
    /// Keep the committed image in the service's status ([`ServiceStatus::committed_image`])
    /// after every event. Nodes don't (see there); tests that compare replicas' images do.
    pub publish_committed_image: bool,
    /// Where the ACLs and SCRAM credentials of the committed image go for the node's Kafka
    /// listeners.
    pub acls: crate::acl_slot::AclSlot,
}

pub use crate::port::ServiceStatus;

/// How often the service's status goes to the driver's shard besides on a change of its
/// activity.
const STATUS_REFRESH_MS: u64 = 500;

/// The controller service of one node. See the module doc.
pub struct ControllerService {
    core: ServiceCore,
    port: ServiceEnd,
    shutdown: ShutdownSignal,
    clock_origin: Instant,
    /// The latest status, for tasks on the service's shard.
    status: Rc<RefCell<ServiceStatus>>,
    /// Proposals sent and not yet replayed: their end offset and when they left.
    proposed: VecDeque<(LogOffset, Instant)>,
    /// A snapshot encoded off the shard, to offer to the driver.
    encoded_snapshot: Rc<RefCell<Option<(LogOffset, Payload)>>>,
    tick_interval: Duration,
    batch_requests_max: usize,
    /// Where the committed ACLs go for the Kafka listeners.
    acls: crate::acl_slot::AclSlot,
}

/// Why the loop woke up.
enum Event {
    Shutdown,
    Message(ToService),
    DriverGone,
    Timer,
}

impl ControllerService {
    /// A service for `controller` (fresh: the committed stream replays the log from the
    /// driver's start) on the service's end of a port. Run it with
    /// [`ControllerService::run`].
    pub fn new(
        config: ControllerServiceConfig,
        controller: Controller,
        port: ServiceEnd,
        shutdown: ShutdownSignal,
    ) -> ControllerService {
        assert!(config.controller_tick_interval_ms > 0);
        let tick_interval = Duration::from_millis(config.controller_tick_interval_ms);
        let batch_requests_max = config.batch_requests_max.max(1);
        let acls = config.acls.clone();
        let core = ServiceCore::new(config, controller);
        let status = Rc::new(RefCell::new(core.status(true)));
        ControllerService {
            core,
            port,
            shutdown,
            clock_origin: Instant::now(),
            status,
            proposed: VecDeque::new(),
            encoded_snapshot: Rc::default(),
            tick_interval,
            batch_requests_max,
            acls,
        }
    }

    /// The service's status, updated after every event it handles (on its own shard).
    pub fn status(&self) -> Rc<RefCell<ServiceStatus>> {
        self.status.clone()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock_origin.elapsed().as_millis()).expect("uptime fits in u64 ms")
    }

    /// Runs until the shutdown signal or until the driver's end of the port goes away, then
    /// resigns and returns the controller. A committed batch that does not fit the image stops
    /// it with the error.
    pub async fn run(mut self) -> Result<Controller> {
        let mut next_tick = Instant::now() + self.tick_interval;
        let mut next_status = Instant::now();
        let mut last_active = None;
        let mut brokers = crate::port::BrokerCounts::default();
        let outcome = loop {
            let encoded = self.encoded_snapshot.borrow_mut().take();
            if let Some((end_offset, data)) = encoded {
                self.core.snapshot_taken();
                if self
                    .port
                    .tx
                    .send(ToDriver::Snapshot { end_offset, data })
                    .await
                    .is_err()
                {
                    break Ok(());
                }
            }
            if let Some(due) = self.core.take_snapshot_due() {
                self.offer_snapshot(due);
            }
            if !self.flush().await {
                break Ok(());
            }
            let mut status = self.core.status(true);
            status.brokers = brokers;
            let now = Instant::now();
            if status.active_epoch != last_active || now >= next_status {
                last_active = status.active_epoch;
                next_status = now + Duration::from_millis(STATUS_REFRESH_MS);
                brokers = self.core.broker_counts();
                status.brokers = brokers;
                if self
                    .port
                    .tx
                    .send(ToDriver::Status(Box::new(status.clone())))
                    .await
                    .is_err()
                {
                    break Ok(());
                }
            }
            *self.status.borrow_mut() = status;
            let wake = next_tick.min(next_status);
            let step = match self.next_event(wake).await {
                Event::Shutdown | Event::DriverGone => break Ok(()),
                Event::Timer => {
                    let now = Instant::now();
                    if now >= next_tick {
                        next_tick = now + self.tick_interval;
                        self.core.tick(self.now_ms())
                    } else {
                        Ok(())
                    }
                }
                Event::Message(m) => self.on_message(m).await,
            };
            if let Err(e) = step {
                break Err(e);
            }
        };
        self.core.stop();
        // The driver's table answers whatever the core still held once the port closes;
        // the verdicts of the resignation go first when there is room.
        let mut last = self.core.status(false);
        last.brokers = self.core.broker_counts();
        *self.status.borrow_mut() = last.clone();
        for m in self
            .core
            .take_outbox()
            .into_iter()
            .chain([ToDriver::Status(Box::new(last))])
        {
            self.port.tx.try_send(m);
        }
        outcome.map(|()| self.core.into_controller())
    }

    /// Feeds one message to the core, with every message ready behind it (consecutive calls
    /// are served together, up to `batch_requests_max`, so they share a proposal).
    async fn on_message(&mut self, first: ToService) -> Result<()> {
        let mut next = Some(first);
        let mut handled = 0;
        while let Some(m) = next.take() {
            let now_ms = self.now_ms();
            match m {
                ToService::Calls(mut calls) => {
                    while calls.len() < self.batch_requests_max {
                        match self.port.rx.ready().await {
                            Some(ToService::Calls(more)) => calls.extend(more),
                            Some(other) => {
                                next = Some(other);
                                break;
                            }
                            None => break,
                        }
                    }
                    self.core.on_calls(calls, now_ms)?;
                }
                ToService::Committed(batches) => {
                    for b in &batches {
                        self.core.on_committed(b, now_ms)?;
                        let end = b.end_offset();
                        while self.proposed.front().is_some_and(|&(e, _)| e <= end) {
                            let (_, at) = self.proposed.pop_front().expect("front exists");
                            self.core.record_replay_latency(at.elapsed());
                        }
                    }
                    let image = self.core.controller().committed_image();
                    self.acls.publish(&image.acls);
                    self.acls.publish_credentials(&image.scram);
                }
                ToService::Status(s) => self.core.on_status(&s, now_ms),
                ToService::Refused {
                    batch,
                    activation,
                    log_end,
                    reason,
                } => {
                    self.core
                        .on_refused(batch, activation, reason, log_end, now_ms);
                    self.proposed.clear();
                }
            }
            handled += 1;
            if next.is_none() && handled < ITEMS_PER_MESSAGE_MAX {
                next = self.port.rx.ready().await;
            }
        }
        Ok(())
    }

    /// Sends what the core produced; false when the driver's end is gone.
    async fn flush(&mut self) -> bool {
        for m in self.core.take_outbox() {
            if let ToDriver::Propose(p) = &m {
                self.proposed
                    .push_back((p.batch.end_offset, Instant::now()));
            }
            if self.port.tx.send(m).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Encodes a due snapshot's records on a blocking thread, so the shard goes on serving;
    /// the loop offers the result to the driver (which writes it off its loop too) on its
    /// next turn.
    fn offer_snapshot(&self, due: self::core::SnapshotDue) {
        let encoded = self.encoded_snapshot.clone();
        glommio::spawn_local(async move {
            let done = glommio::executor()
                .spawn_blocking(move || due.encode())
                .await;
            *encoded.borrow_mut() = Some(done);
        })
        .detach();
    }

    /// The next input: shutdown first, then the port, then the timer.
    async fn next_event(&self, wake: Instant) -> Event {
        let shutdown = async {
            self.shutdown.wait().await;
            Event::Shutdown
        };
        let message = async {
            match self.port.rx.recv().await {
                Some(m) => Event::Message(m),
                None => Event::DriverGone,
            }
        };
        let timer = async {
            glommio::timer::sleep(wake.saturating_duration_since(Instant::now())).await;
            Event::Timer
        };
        or(shutdown, or(message, timer)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::CommittedBatch;
    use corum_controller::encode_batch;
    use corum_types::Epoch;

    /// A committed batch that is not a record batch, or whose header miscounts its records,
    /// stops replay with an error naming the offset; a good one replays.
    #[test]
    fn committed_batches_are_validated() {
        use corum_controller::records::{FeatureLevelRecordV1, MetadataRecord};
        use corum_controller::ControllerConfig;
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        let batch = |payload: &[u8], count: u32| CommittedBatch {
            base_offset: LogOffset(3),
            epoch: Epoch(1),
            record_count: count,
            control: false,
            payload: Payload::from(payload),
            snapshot: false,
        };
        assert!(matches!(
            core::replay_committed(&mut c, &batch(b"not a batch", 1)),
            Err(ServiceError::Decode {
                offset: LogOffset(3),
                ..
            })
        ));
        let records = vec![MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "metadata.version".into(),
            min_level: 1,
            max_level: 1,
        })];
        let encoded = encode_batch(&records);
        assert!(matches!(
            core::replay_committed(&mut c, &batch(&encoded, 2)),
            Err(ServiceError::RecordCount {
                header: 2,
                decoded: 1,
                ..
            })
        ));
        assert_eq!(c.committed_end(), LogOffset(0));
        core::replay_committed(&mut c, &batch(&encoded, 1)).unwrap();
        assert_eq!(c.committed_end(), LogOffset(4));
    }
}
