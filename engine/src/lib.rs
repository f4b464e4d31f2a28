//! The replicated log engine: record frames, the `Disk` seam, the segmented log.
