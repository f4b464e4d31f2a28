//! Controller configuration, with a limit on everything and `validate()`.

use crate::error::ConfigError;

/// Knobs of the controller state machine. Names follow Kafka's configs where one exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker's lease lasts this long after each heartbeat; this is
    /// also the lease duration returned in heartbeat responses.
    pub session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms`: how often brokers should heartbeat (must be well below the
    /// session timeout so a lost heartbeat or two does not fence a broker).
    pub heartbeat_interval_ms: u64,
    /// `num.partitions`: partitions of a topic created with a partition count of -1.
    pub default_partitions: u32,
    /// `default.replication.factor`: replicas per partition when a topic asks for -1.
    pub default_replication_factor: u16,
    /// `min.insync.replicas` of the controller's own static config: the fallback of every
    /// topic's min ISR (eligible leader replicas, KIP-966), and the cluster default the first
    /// controller writes when the cluster starts with them enabled (Kafka's
    /// `getStaticallyConfiguredMinInsyncReplicas`).
    pub min_insync_replicas: u16,
    /// Most partitions one topic may have (and most created by one request).
    pub partitions_per_topic_max: u32,
    /// Most replicas per partition.
    pub replication_factor_max: u16,
    /// Most records one handler may return (one Raft proposal). Longer work (controlled shutdown,
    /// fencing a broker that leads many partitions) continues on the next heartbeat or tick.
    pub records_per_batch_max: usize,
    /// Producer ids handed out per AllocateProducerIds request.
    pub producer_id_block_size: u64,
    /// Seed of the deterministic generator that draws topic ids and the placement start index.
    pub seed: u64,
    /// The features the cluster was formatted with (`corum format --release-version`, the
    /// node's `bootstrap.checkpoint`), in name order: the first active controller finalizes
    /// them when the log holds no `metadata.version` yet.
    pub bootstrap_features: Vec<crate::control::feature_control::BootstrapFeature>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            session_timeout_ms: 9_000,
            heartbeat_interval_ms: 2_000,
            default_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas: 1,
            partitions_per_topic_max: 100_000,
            replication_factor_max: 16,
            records_per_batch_max: 10_000,
            producer_id_block_size: 1_000,
            seed: 0x636f_7275_6d00,
            bootstrap_features: crate::control::feature_control::default_bootstrap_features(),
        }
    }
}

impl ControllerConfig {
    /// Checks every value and the relations between them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |name, value: u64, reason| {
            Err(ConfigError::Invalid {
                name,
                value,
                reason,
            })
        };
        if self.session_timeout_ms == 0 {
            return bad("broker.session.timeout.ms", 0, "must be positive");
        }
        if self.heartbeat_interval_ms == 0
            || self.heartbeat_interval_ms * 2 > self.session_timeout_ms
        {
            return bad(
                "broker.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                "must be positive and at most half of broker.session.timeout.ms",
            );
        }
        if self.partitions_per_topic_max == 0 {
            return bad("partitions.per.topic.max", 0, "must be positive");
        }
        if self.default_partitions == 0 || self.default_partitions > self.partitions_per_topic_max {
            return bad(
                "num.partitions",
                self.default_partitions.into(),
                "must be in 1..=partitions.per.topic.max",
            );
        }
        if self.replication_factor_max == 0 {
            return bad("replication.factor.max", 0, "must be positive");
        }
        if self.default_replication_factor == 0
            || self.default_replication_factor > self.replication_factor_max
        {
            return bad(
                "default.replication.factor",
                self.default_replication_factor.into(),
                "must be in 1..=replication.factor.max",
            );
        }
        if self.min_insync_replicas == 0 {
            return bad("min.insync.replicas", 0, "must be at least 1");
        }
        // A batch must at least hold a registration plus the changes of one partition, and stay
        // far below rkyv's 32-bit relative pointers.
        if !(8..=1_000_000).contains(&self.records_per_batch_max) {
            return bad(
                "records.per.batch.max",
                self.records_per_batch_max as u64,
                "must be in 8..=1000000",
            );
        }
        if self.producer_id_block_size == 0 || self.producer_id_block_size > 1 << 20 {
            return bad(
                "producer.id.block.size",
                self.producer_id_block_size,
                "must be in 1..=1048576",
            );
        }
        if crate::control::feature_control::check_bootstrap_features(&self.bootstrap_features)
            .is_err()
        {
            return bad(
                "bootstrap.features",
                self.bootstrap_features.len() as u64,
                "must set metadata.version, in name order, at levels this controller supports",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are valid and each broken value is reported under its own name.
    #[test]
    fn validate_names_the_bad_value() {
        assert_eq!(ControllerConfig::default().validate(), Ok(()));
        let c = ControllerConfig {
            heartbeat_interval_ms: 5_000,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                name: "broker.heartbeat.interval.ms",
                ..
            })
        ));
        let c = ControllerConfig {
            default_replication_factor: 0,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                name: "default.replication.factor",
                ..
            })
        ));
        let c = ControllerConfig {
            records_per_batch_max: 2,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                name: "records.per.batch.max",
                ..
            })
        ));
        let c = ControllerConfig {
            session_timeout_ms: 0,
            ..Default::default()
        };
        assert!(c.validate().is_err());
    }
}
