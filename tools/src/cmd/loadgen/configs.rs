//! The `configs` workload: single-key config writes, one record per request, and the
//! `--verify` read-back (see the parent module doc for the rules).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_client::{ClientError, ControllerClient};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, ConfigSource,
    IncrementalAlterConfigsRequest,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;

use super::stats::{error_kind, Report};
use super::{run_clients, start_measuring, stop_measuring, Ctx};

/// The broker resource of client `i` is `RESOURCE_BASE + i`.
pub const RESOURCE_BASE: u64 = 2_000_000_000;
/// The key every client writes (a broker config of type Long).
pub const KEY: &str = "log.retention.ms";
/// Values are `nonce * SEQ_SPAN + seq`.
const SEQ_SPAN: u64 = 1_000_000_000_000;
/// Resources per DescribeConfigs of the read-back.
const READ_BATCH: usize = 64;

/// The value client writes carry: unique per run (`nonce`) and write (`seq >= 1`).
pub fn encode_value(nonce: u64, seq: u64) -> String {
    assert!(seq < SEQ_SPAN, "sequence {seq} out of range");
    (nonce * SEQ_SPAN + seq).to_string()
}

/// The sequence number of `value` if this run (`nonce`) wrote it.
pub fn decode_value(value: &str, nonce: u64) -> Option<u64> {
    let v: u64 = value.parse().ok()?;
    (v / SEQ_SPAN == nonce && v % SEQ_SPAN > 0).then_some(v % SEQ_SPAN)
}

/// Acknowledged writes (ascending sequence numbers `acked`) missing when the resource reads
/// back `read`: those newer than what was read (all of them when nothing of this run was).
pub fn lost_writes(acked: &[u64], read: Option<u64>) -> u64 {
    let kept = match read {
        Some(r) => acked.partition_point(|&s| s <= r),
        None => 0,
    };
    (acked.len() - kept) as u64
}

fn resource(i: usize) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: (RESOURCE_BASE + i as u64).to_string(),
    }
}

fn write(i: usize, value: String) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: resource(i),
            configs: vec![AlterableConfig {
                key: KEY.into(),
                op: AlterConfigOp::Set,
                value,
            }],
        }],
        validate_only: false,
    }
}

/// Pause after a failed request, so a client without a leader does not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

pub(crate) async fn run(ctx: &mut Ctx, report: &mut Report) -> anyhow::Result<Duration> {
    let clients = ctx.config.clients;
    let verify = ctx.config.verify;
    // Per client, the sequence numbers acknowledged (ascending: one request in flight).
    let acked: Rc<RefCell<Vec<Vec<u64>>>> = Rc::new(RefCell::new(vec![Vec::new(); clients]));
    let start = start_measuring(ctx).await?;
    let (end, nonce) = (ctx.end, ctx.nonce);
    report.unfinished = run_clients(clients, ctx.hard_end, |i| {
        let client = ctx.client(i).clone();
        let rec = ctx.recorder.clone();
        let acked = acked.clone();
        async move {
            let mut seq = 0u64;
            while Instant::now() < end {
                seq += 1;
                let sent = Instant::now();
                match client
                    .alter_configs(write(i, encode_value(nonce, seq)))
                    .await
                {
                    Ok(resp) => match resp.resources.first() {
                        Some((_, Ok(()))) if resp.resources.len() == 1 => {
                            rec.ok(sent.elapsed());
                            if verify {
                                acked.borrow_mut()[i].push(seq);
                            }
                        }
                        Some((_, Err(e))) => {
                            rec.error(&error_kind(&e.to_string()));
                            glommio::timer::sleep(ERROR_PAUSE).await;
                        }
                        _ => rec.error("malformed IncrementalAlterConfigs answer"),
                    },
                    Err(e) => {
                        rec.error(&error_kind(&e.to_string()));
                        glommio::timer::sleep(ERROR_PAUSE).await;
                    }
                }
            }
        }
    })
    .await;
    let elapsed = stop_measuring(ctx, start).await;
    if verify {
        // The read-back gets a grace period of its own, however long the last requests took.
        let verify_end = Instant::now() + ctx.config.grace;
        let read = read_back(&ctx.clients[0], clients, nonce, verify_end).await?;
        let acked = acked.borrow();
        report.acknowledged = Some(acked.iter().map(|a| a.len() as u64).sum());
        report.lost = Some(
            acked
                .iter()
                .zip(&read)
                .map(|(a, &r)| lost_writes(a, r))
                .sum(),
        );
    }
    Ok(elapsed)
}

/// Reads every client's resource back: per client the sequence number of this run's value
/// found (`None` if the value is not this run's or the key is not set). Each batch is retried
/// until `deadline`; a batch that cannot be read by then fails the verification.
async fn read_back(
    client: &ControllerClient,
    clients: usize,
    nonce: u64,
    deadline: Instant,
) -> anyhow::Result<Vec<Option<u64>>> {
    let mut out = Vec::with_capacity(clients);
    let indexes: Vec<usize> = (0..clients).collect();
    for chunk in indexes.chunks(READ_BATCH) {
        let resources: Vec<ConfigResource> = chunk.iter().map(|&i| resource(i)).collect();
        let resp = loop {
            match client.describe_configs(resources.clone()).await {
                Ok(r) => break r,
                Err(e) if Instant::now() < deadline && retriable(&e) => {
                    glommio::timer::sleep(ERROR_PAUSE).await;
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context("verification incomplete: reading the written configs back"))
                }
            }
        };
        anyhow::ensure!(
            resp.resources.len() == resources.len(),
            "DescribeConfigs answered {} resources for {}",
            resp.resources.len(),
            resources.len()
        );
        for ((asked, (got, result)), &i) in resources.iter().zip(&resp.resources).zip(chunk) {
            anyhow::ensure!(
                asked == got,
                "DescribeConfigs answered {got:?} where {asked:?} was asked"
            );
            let configs = result
                .as_ref()
                .map_err(|e| anyhow::anyhow!("reading back client {i}'s resource: {e}"))?;
            let seq = configs
                .iter()
                .find(|c| c.name == KEY && c.source == ConfigSource::DynamicBroker)
                .and_then(|c| decode_value(c.value.as_deref()?, nonce));
            out.push(seq);
        }
    }
    Ok(out)
}

/// Failures worth retrying within the grace period (no leader yet, a timeout); a refusal of
/// the request itself is not.
fn retriable(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::LeaderNotFound { .. }
            | ClientError::NoServerReachable { .. }
            | ClientError::Timeout { .. }
            | ClientError::Rpc(corum_client::RpcError::Timeout { .. })
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values round-trip through their encoding and only this run's decode.
    #[test]
    fn values_round_trip() {
        let v = encode_value(42, 7);
        assert_eq!(decode_value(&v, 42), Some(7));
        assert_eq!(decode_value(&v, 43), None);
        assert_eq!(decode_value("604800000", 42), None);
        assert_eq!(decode_value("-1", 42), None);
        assert_eq!(
            decode_value(&encode_value(8_999_999, SEQ_SPAN - 1), 8_999_999),
            Some(SEQ_SPAN - 1)
        );
        // The largest value still fits the Long the key is validated as.
        assert!(encode_value(8_999_999, SEQ_SPAN - 1).parse::<i64>().is_ok());
    }

    /// Acknowledged writes newer than the value read back are lost; older ones were
    /// overwritten by later acknowledged writes of the same client.
    #[test]
    fn loss_counting() {
        assert_eq!(lost_writes(&[1, 2, 3], Some(3)), 0);
        assert_eq!(
            lost_writes(&[1, 2, 3], Some(4)),
            0,
            "an unacknowledged later write applied"
        );
        assert_eq!(lost_writes(&[1, 2, 3], Some(2)), 1);
        assert_eq!(lost_writes(&[1, 2, 5], Some(4)), 1);
        assert_eq!(lost_writes(&[1, 2, 3], None), 3);
        assert_eq!(lost_writes(&[], None), 0);
    }

    /// Every client writes its own broker resource, one key, one Set.
    #[test]
    fn one_record_per_request() {
        let w = write(3, encode_value(1, 1));
        assert_eq!(w.resources.len(), 1);
        assert_eq!(w.resources[0].resource.name, "2000000003");
        assert_eq!(w.resources[0].configs.len(), 1);
        assert_eq!(w.resources[0].configs[0].key, KEY);
        assert!(!w.validate_only);
    }
}
