//! A minimal in-memory driver for the controller: proposes handler records as encoded batches,
//! commits them on demand, and cross-checks the controller against a fresh replay of the log.

#![allow(dead_code)]

use corum_controller::{
    decode_batch, encode_batch, Controller, ControllerConfig, MetadataImage, MetadataRecord,
    RequestContext,
};
use corum_types::{LogOffset, NodeId};
use rkyv::util::AlignedVec;

pub struct Driver {
    pub controller: Controller,
    pub now_ms: u64,
    /// Committed batches: (base offset, bytes).
    pub log: Vec<(LogOffset, AlignedVec)>,
    /// Proposed, not yet committed.
    pub pending: Vec<(LogOffset, AlignedVec)>,
    pub committed_end: LogOffset,
}

impl Driver {
    pub fn new(config: ControllerConfig) -> Self {
        let mut controller = Controller::new(config, NodeId(100)).unwrap();
        controller.on_become_active(0);
        Driver {
            controller,
            now_ms: 0,
            log: vec![],
            pending: vec![],
            committed_end: LogOffset(0),
        }
    }

    pub fn log_end(&self) -> LogOffset {
        self.pending
            .last()
            .or(self.log.last())
            .map_or(LogOffset(0), |(base, bytes)| {
                base.add(decode_batch(bytes).unwrap().len() as u64)
            })
    }

    pub fn ctx(&self) -> RequestContext {
        RequestContext {
            now_ms: self.now_ms,
            next_offset: self.log_end(),
            high_watermark: self.committed_end,
        }
    }

    /// Proposes `records` as one batch (nothing if empty).
    pub fn propose(&mut self, records: &[MetadataRecord]) {
        if records.is_empty() {
            return;
        }
        let base = self.log_end();
        let bytes = encode_batch(records);
        self.controller
            .on_proposed(base, records)
            .expect("own proposal applies");
        self.pending.push((base, bytes));
        self.controller.check_invariants();
    }

    /// Commits every pending batch; returns how many.
    pub fn commit(&mut self) -> usize {
        let n = self.pending.len();
        for (base, bytes) in std::mem::take(&mut self.pending) {
            let batch = decode_batch(&bytes).unwrap();
            self.controller
                .replay_batch(base, batch)
                .expect("committed batch replays");
            self.committed_end = base.add(batch.len() as u64);
            self.log.push((base, bytes));
            self.controller.check_invariants();
        }
        assert_eq!(self.controller.committed_image(), self.controller.image());
        assert_eq!(
            &replay_log(&self.log),
            self.controller.committed_image(),
            "fresh replay differs"
        );
        n
    }

    /// Loses leadership with uncommitted proposals (they are dropped from the log) and wins it
    /// back at once.
    pub fn fail_over(&mut self) {
        self.controller.on_resign();
        self.pending.clear();
        assert_eq!(
            &replay_log(&self.log),
            self.controller.image(),
            "resign reverts to the committed image"
        );
        self.controller.on_become_active(self.now_ms);
    }
}

/// A fresh image from every committed batch.
pub fn replay_log(log: &[(LogOffset, AlignedVec)]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for (base, bytes) in log {
        for (i, r) in decode_batch(bytes).unwrap().iter().enumerate() {
            image.replay(base.add(i as u64), r).unwrap();
        }
    }
    image
}
