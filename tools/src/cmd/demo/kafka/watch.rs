//! What corum says about the Kafka brokers while `corum demo --kafka` runs: a thread with a
//! glommio executor of its own asks the active controller every [`POLL_INTERVAL`]
//! (DescribeCluster, then DescribeTopics of every topic) and keeps the newest answer as a
//! [`View`] stamped with the moment it arrived; the demo's thread waits on conditions over
//! those views ([`Watch::wait_for`]) until a deadline.
//!
//! A condition met is therefore seen at most one poll (plus one round trip) after corum
//! decided it: the timings the demo prints are good to about [`POLL_INTERVAL`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::{ClientConfig, ControllerClient, RequestBody, ResponseBody};
use corum_controller::control::replication_control::DescribeTopicsRequest;
use corum_engine::disk::executor_builder;

/// How often corum is asked.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// One attempt of a poll's request; a poll that fails is recorded and the next one tries again.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one poll follows leader changes before it counts as failed.
const RETRY_DEADLINE: Duration = Duration::from_secs(4);

/// One broker as corum has it registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerState {
    pub epoch: u64,
    pub fenced: bool,
    pub shutting_down: bool,
}

/// One partition's leader and replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    pub topic: String,
    pub partition: u32,
    pub leader: Option<u32>,
    pub replicas: Vec<u32>,
    pub isr: Vec<u32>,
}

/// The cluster as the active controller answered one poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// When the answer arrived.
    pub at: Instant,
    /// The active controller (a corum node id).
    pub controller: u32,
    pub brokers: BTreeMap<u32, BrokerState>,
    /// Every partition of every topic, in topic name and partition order.
    pub partitions: Vec<PartitionState>,
}

impl View {
    /// Whether broker `id` is registered and unfenced (and not shutting down).
    pub fn unfenced(&self, id: u32) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && !b.shutting_down)
    }

    pub fn fenced(&self, id: u32) -> bool {
        self.brokers.get(&id).is_some_and(|b| b.fenced)
    }

    pub fn epoch(&self, id: u32) -> Option<u64> {
        self.brokers.get(&id).map(|b| b.epoch)
    }

    /// Partitions (of every topic) broker `id` leads.
    pub fn led_by(&self, id: u32) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.leader == Some(id))
            .count()
    }

    /// Partitions of `topic` broker `id` leads.
    pub fn led_by_in(&self, id: u32, topic: &str) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.topic == topic && p.leader == Some(id))
            .count()
    }

    /// Partitions whose ISR holds broker `id`.
    pub fn in_isr(&self, id: u32) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.isr.contains(&id))
            .count()
    }

    /// Partitions broker `id` is a replica of.
    pub fn replica_of(&self, id: u32) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.replicas.contains(&id))
            .count()
    }

    /// The partitions of `topic`.
    pub fn topic<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = &'a PartitionState> + 'a {
        self.partitions.iter().filter(move |p| p.topic == topic)
    }

    /// One line for error messages: each broker's state, and per broker the partitions it
    /// leads and the ISRs it is in.
    pub fn describe(&self) -> String {
        let mut out = format!("controller {}; brokers", self.controller);
        if self.brokers.is_empty() {
            out.push_str(" none");
        }
        for (id, b) in &self.brokers {
            let state = if b.fenced {
                "fenced"
            } else if b.shutting_down {
                "shutting down"
            } else {
                "unfenced"
            };
            let _ = write!(
                out,
                " {id} ({state}, epoch {}, leads {}, in {} ISRs)",
                b.epoch,
                self.led_by(*id),
                self.in_isr(*id)
            );
        }
        let _ = write!(out, "; {} partitions", self.partitions.len());
        out
    }
}

#[derive(Default)]
struct WatchState {
    latest: Option<View>,
    /// The last failed poll's error, cleared by the next answer.
    last_error: Option<String>,
}

struct Shared {
    state: Mutex<WatchState>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, WatchState> {
        // The poller never panics while holding the lock; the data stays valid if it did.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The polling thread and what it saw. Dropping it stops the thread (it is not waited for: a
/// poll in flight may take up to its retry deadline to give up).
pub struct Watch {
    shared: Arc<Shared>,
}

impl Watch {
    /// Starts polling the quorum at `bootstrap` (its client endpoints).
    pub fn start(bootstrap: Vec<SocketAddr>) -> anyhow::Result<Watch> {
        let shared = Arc::new(Shared {
            state: Mutex::new(WatchState::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let poller = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("corum-demo-watch".into())
            .spawn(move || {
                let executor = match executor_builder("corum-demo-watch").make() {
                    Ok(e) => e,
                    Err(e) => {
                        poller.lock().last_error = Some(format!("starting glommio: {e}"));
                        return;
                    }
                };
                executor.run(poll(bootstrap, poller));
            })
            .context("starting the watch thread")?;
        Ok(Watch { shared })
    }

    /// The newest view, if any poll was answered yet.
    pub fn latest(&self) -> Option<View> {
        self.shared.lock().latest.clone()
    }

    /// Waits until `deadline` for the first view received at or after `after` in which
    /// `cond` holds; `None` if none came by then.
    pub fn wait_for(
        &self,
        after: Instant,
        deadline: Instant,
        cond: impl Fn(&View) -> bool,
    ) -> Option<View> {
        let mut state = self.shared.lock();
        loop {
            if let Some(v) = &state.latest {
                if v.at >= after && cond(v) {
                    return Some(v.clone());
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// The newest view and the last poll error, for error messages.
    pub fn state_line(&self) -> String {
        let state = self.shared.lock();
        let mut line = state
            .latest
            .as_ref()
            .map_or("no answer from corum yet".to_owned(), View::describe);
        if let Some(e) = &state.last_error {
            let _ = write!(line, "; last poll error: {e}");
        }
        line
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

async fn poll(bootstrap: Vec<SocketAddr>, shared: Arc<Shared>) {
    let config = ClientConfig {
        request_timeout: REQUEST_TIMEOUT,
        retry_deadline: RETRY_DEADLINE,
        ..ClientConfig::new(bootstrap)
    };
    let mut client = None;
    while !shared.stop.load(Ordering::SeqCst) {
        if client.is_none() {
            match ControllerClient::connect(config.clone()).await {
                Ok(c) => client = Some(c),
                Err(e) => shared.lock().last_error = Some(format!("connecting: {e}")),
            }
        }
        if let Some(c) = &client {
            match poll_once(c).await {
                Ok(view) => {
                    let mut state = shared.lock();
                    state.latest = Some(view);
                    state.last_error = None;
                    shared.changed.notify_all();
                }
                Err(e) => shared.lock().last_error = Some(format!("{e:#}")),
            }
        }
        glommio::timer::sleep(POLL_INTERVAL).await;
    }
}

async fn poll_once(client: &ControllerClient) -> anyhow::Result<View> {
    let cluster = client.describe_cluster().await.context("DescribeCluster")?;
    let topics = match client
        .call(RequestBody::DescribeTopics(DescribeTopicsRequest {
            topics: None,
        }))
        .await
        .context("DescribeTopics")?
    {
        ResponseBody::DescribeTopics(r) => r,
        other => anyhow::bail!(
            "DescribeTopics was answered with a {} response (a server bug)",
            other.kind()
        ),
    };
    let brokers = cluster
        .brokers
        .iter()
        .map(|b| {
            (
                b.broker_id.0,
                BrokerState {
                    epoch: b.broker_epoch.0,
                    fenced: b.fenced,
                    shutting_down: b.in_controlled_shutdown,
                },
            )
        })
        .collect();
    let mut partitions = Vec::new();
    // A topic deleted between the two requests answers an error: it is simply not there.
    for (_, topic) in topics.topics {
        let Ok(t) = topic else { continue };
        for p in t.partitions {
            partitions.push(PartitionState {
                topic: t.name.clone(),
                partition: p.partition_id.0,
                leader: p.leader.map(|l| l.0),
                replicas: p.replicas.iter().map(|r| r.0).collect(),
                isr: p.isr.iter().map(|r| r.0).collect(),
            });
        }
    }
    Ok(View {
        at: Instant::now(),
        controller: cluster.controller_id.0,
        brokers,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn view(brokers: &[(u32, bool)], partitions: &[(&str, Option<u32>, &[u32])]) -> View {
        View {
            at: Instant::now(),
            controller: 1,
            brokers: brokers
                .iter()
                .map(|&(id, fenced)| {
                    (
                        id,
                        BrokerState {
                            epoch: u64::from(id) * 10,
                            fenced,
                            shutting_down: false,
                        },
                    )
                })
                .collect(),
            partitions: partitions
                .iter()
                .enumerate()
                .map(|(i, (topic, leader, isr))| PartitionState {
                    topic: (*topic).to_owned(),
                    partition: i as u32,
                    leader: *leader,
                    replicas: vec![4, 5, 6],
                    isr: isr.to_vec(),
                })
                .collect(),
        }
    }

    /// A view answers who is fenced, who leads what and who is in which ISR, per topic too.
    #[test]
    fn view_questions() {
        let v = view(
            &[(4, false), (5, true)],
            &[
                ("t", Some(4), &[4, 6]),
                ("t", Some(6), &[6]),
                ("__consumer_offsets", Some(4), &[4]),
            ],
        );
        assert!(v.unfenced(4) && !v.unfenced(5) && !v.unfenced(6));
        assert!(v.fenced(5) && !v.fenced(6));
        assert_eq!(v.epoch(5), Some(50));
        assert_eq!((v.led_by(4), v.led_by_in(4, "t"), v.led_by(5)), (2, 1, 0));
        assert_eq!((v.in_isr(4), v.in_isr(6), v.in_isr(5)), (2, 2, 0));
        assert_eq!(v.replica_of(5), 3);
        assert_eq!(v.topic("t").count(), 2);
        let d = v.describe();
        assert!(
            d.contains("4 (unfenced, epoch 40, leads 2, in 2 ISRs)"),
            "{d}"
        );
        assert!(d.contains("5 (fenced"), "{d}");
    }
}
