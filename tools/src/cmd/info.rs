//! `corum info --dir DIR`: what a log directory holds: whether it is formatted, its identity
//! (cluster, node and directory ids), the bootstrap voter set, the persisted quorum state, and
//! the metadata log as a start would recover it (and what recovery would cut), and every file
//! with its size. Nothing is written: every file is read through a read-only disk. A damaged
//! node file is shown with its error; the command fails only if the directory cannot be
//! listed.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use corum_node::data_dir::LogFit;
use corum_node::format::{inspect_dir, DirectoryInfo};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The log directory (`metadata.log.dir`).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let info =
        inspect_dir(&args.dir).with_context(|| format!("inspecting {}", args.dir.display()))?;
    print!("{}", render(&info));
    Ok(())
}

/// The report as text.
pub fn render(info: &DirectoryInfo) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "directory: {}", info.dir.display());
    match &info.meta {
        Ok(Some(m)) => {
            let _ = writeln!(w, "formatted: yes");
            let _ = writeln!(w, "cluster.id: {}", m.cluster_id);
            let _ = writeln!(w, "node.id: {}", m.node_id);
            let _ = writeln!(w, "directory.id: {}", m.directory_id);
        }
        Ok(None) => {
            let _ = writeln!(w, "formatted: no (no meta.properties)");
        }
        Err(e) => {
            let _ = writeln!(w, "formatted: unreadable meta.properties: {e}");
        }
    }
    match &info.bootstrap {
        Ok(Some(b)) if b.kraft_version == 0 => {
            let _ = writeln!(
                w,
                "bootstrap: kraft.version 0 (static quorum: voters from controller.quorum.voters)"
            );
        }
        Ok(Some(b)) => {
            let _ = writeln!(
                w,
                "bootstrap: kraft.version {}, {} voter(s)",
                b.kraft_version,
                b.voters.len()
            );
            for v in &b.voters {
                let eps: Vec<String> = v
                    .endpoints
                    .iter()
                    .map(|e| format!("{}://{}:{}", e.name, e.host, e.port))
                    .collect();
                let _ = writeln!(
                    w,
                    "  voter {} directory {} {}",
                    v.id,
                    v.directory_id,
                    eps.join(",")
                );
            }
        }
        Ok(None) => {
            let _ = writeln!(w, "bootstrap: none");
        }
        Err(e) => {
            let _ = writeln!(w, "bootstrap: unreadable: {e}");
        }
    }
    if let Ok(Some(b)) = &info.bootstrap {
        let _ = writeln!(
            w,
            "bootstrap features: {}",
            super::format::describe_features(&b.features)
        );
    }
    match &info.quorum_state {
        Ok(Some(q)) => {
            let leader = q.leader.map_or("none".to_owned(), |l| l.to_string());
            let voted = q
                .voted_for
                .map_or("none".to_owned(), |v| match v.directory_id {
                    Some(d) => format!("{} (directory {d})", v.id),
                    None => v.id.to_string(),
                });
            let _ = writeln!(
                w,
                "quorum-state: epoch {} leader {leader} voted-for {voted}",
                q.epoch.0
            );
        }
        Ok(None) => {
            let _ = writeln!(w, "quorum-state: none (never started)");
        }
        Err(e) => {
            let _ = writeln!(w, "quorum-state: unreadable: {e}");
        }
    }
    match (&info.snapshots, &info.newest_snapshot) {
        (Err(e), _) => {
            let _ = writeln!(w, "snapshots: unreadable: {e}");
        }
        (Ok(ids), _) if ids.is_empty() => {
            let _ = writeln!(w, "snapshots: none");
        }
        (Ok(ids), newest) => {
            let _ = writeln!(w, "snapshots: {}", ids.len());
            match newest {
                Some(Ok(s)) => {
                    let _ = writeln!(
                        w,
                        "  newest: through offset {} (epoch {}), {} voter(s), {} bytes of state: loads",
                        s.id.end_offset.0, s.id.epoch.0, s.voters, s.data_bytes
                    );
                }
                Some(Err(e)) => {
                    let _ = writeln!(w, "  newest: DOES NOT LOAD: {e}");
                }
                None => {}
            }
        }
    }
    match &info.log {
        Ok(l) => {
            let _ = writeln!(
                w,
                "metadata log: offsets {} to {} as a start would recover it",
                l.start_offset.get(),
                l.end_offset.get()
            );
            if let Some(t) = &l.torn_tail {
                let _ = writeln!(
                    w,
                    "  recovery would cut a torn tail: {} bytes at byte {} of {}: {}",
                    t.dropped_bytes,
                    t.position,
                    t.segment.display(),
                    t.reason
                );
            }
            if l.unfinished_segments > 0 {
                let _ = writeln!(
                    w,
                    "  recovery would remove {} segment(s) of an unfinished roll",
                    l.unfinished_segments
                );
            }
            match l.fit {
                LogFit::Continues => {}
                LogFit::SuffixCut {
                    snapshot_end,
                    log_end,
                } => {
                    let _ = writeln!(
                        w,
                        "  recovery would cut offsets {} to {}: they do not continue the snapshot",
                        snapshot_end.get(),
                        log_end.get()
                    );
                }
                LogFit::Restarted {
                    log_end,
                    snapshot_end,
                } => {
                    let _ = writeln!(
                        w,
                        "  the log ends at {}, before the snapshot's end {}: it restarts empty there",
                        log_end.get(),
                        snapshot_end.get()
                    );
                }
            }
        }
        Err(e) => {
            let _ = writeln!(w, "metadata log: DOES NOT RECOVER: {e}");
        }
    }
    let _ = writeln!(w, "files:");
    if info.entries.is_empty() {
        let _ = writeln!(w, "  (empty)");
    }
    for e in &info.entries {
        if e.is_dir {
            let _ = writeln!(w, "  {}/", e.path.display());
        } else {
            let _ = writeln!(w, "  {} ({} bytes)", e.path.display(), e.len_bytes);
        }
    }
    out
}
