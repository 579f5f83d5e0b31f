//! A session a previous process left behind: re-adopted when its tmux session lives on,
//! closed when its PTY died with that process, and its screen rebuilt from stored frames.

use std::sync::Arc;

use anyhow::Result;
use wire::{CloseReason, SessionFrame};

use super::host::Host;
use super::sandboxed::Sandboxed;
use super::{Sessions, actor, host, pty, sandboxed, screen};
use crate::clock;
use crate::sessions::new_frame;
use crate::store::{Frame, FrameBody, SessionRow};

impl Sessions {
    /// Re-adopts the managed sessions a previous process of this node left running whose
    /// tmux session lives on; closes the others: their PTYs died with it.
    pub async fn recover(&self) -> Result<()> {
        let store = &self.inner.store;
        store.sessions().delete_pooled(None).await?;
        for row in store.sessions().running(&self.inner.node_id).await? {
            if let (host::TMUX, Some(socket)) =
                (row.backend.as_str(), &self.inner.settings.tmux_socket)
            {
                let tmux = host::Tmux {
                    socket: socket.clone(),
                };
                if self.adopt(&row, tmux).await? {
                    continue;
                }
            }
            let detail = "ptyhost stopped while the session was running";
            if self
                .close_abandoned(&row, CloseReason::InstanceTerminated, detail)
                .await?
            {
                tracing::info!(session_id = %row.id, "closed a session left running by a previous process");
            }
        }
        Ok(())
    }

    /// Closes a session of a node that was lost; false when it was closed already.
    pub async fn close_lost(&self, row: &SessionRow) -> Result<bool> {
        let detail = format!(
            "node {} stopped answering while the session was running",
            row.node_id
        );
        self.close_abandoned(row, CloseReason::NodeLost, &detail)
            .await
    }

    /// Ends a running session whose process is gone with a final keyframe rebuilt from its
    /// stored frames and exactly one `Closed`, numbered above anything it may have handed
    /// out; false when someone else closed it first.
    pub(super) async fn close_abandoned(
        &self,
        row: &SessionRow,
        reason: CloseReason,
        detail: &str,
    ) -> Result<bool> {
        let store = &self.inner.store;
        let frames = store.frames().from_last_keyframe(&row.id).await?;
        let mut screen = rebuild_screen(&frames, row.cols, row.rows);
        let mut seq = numbered_upto(row, &frames);
        let (cols, rows) = screen.size();
        let now = clock::now_ms();
        let mut out = Vec::new();
        for frame in [
            SessionFrame::Keyframe {
                snapshot: wire::Base64Bytes(screen.snapshot()),
                snapshot_format: wire::SNAPSHOT_FORMAT.into(),
                snapshot_cols: cols,
                snapshot_rows: rows,
                anchor_sequence: seq,
            },
            SessionFrame::Closed {
                exit_code: None,
                reason,
                detail: Some(detail.into()),
            },
        ] {
            seq += 1;
            out.push(new_frame(seq, &frame, now));
        }
        store
            .nodes()
            .close_abandoned(&row.id, &out, reason.as_str(), now)
            .await
    }

    /// Re-adopts a managed session that outlived the previous process: a new client
    /// attaches to its tmux session and its history goes on from the stored sequence.
    pub(super) async fn adopt(&self, row: &SessionRow, tmux: host::Tmux) -> Result<bool> {
        if !tmux.exists(&row.id).await {
            return Ok(false);
        }
        let frames = self
            .inner
            .store
            .frames()
            .from_last_keyframe(&row.id)
            .await?;
        let screen = rebuild_screen(&frames, row.cols, row.rows);
        let sequence = numbered_upto(row, &frames);
        let (pty, events) = pty::spawn(&tmux.attach_spec(&row.id, row.cols, row.rows))?;
        let reserved = sequence + actor::RESERVE_AHEAD;
        self.inner
            .store
            .frames()
            .reserve_sequences(&row.id, reserved)
            .await?;
        let resumed = Resumed {
            sequence,
            replay_floor: row.replay_floor,
            reserved,
        };
        let sandboxed = match (&row.workspace, sandboxed::stored_limits(row)) {
            (Some(w), Some(limits)) => Some(Arc::new(Sandboxed::adopted(
                &row.id,
                std::path::Path::new(w),
                limits,
                &self.inner.settings.sandbox,
            ))),
            _ => None,
        };
        self.launch(
            &row.id,
            pty,
            events,
            screen,
            Host::Tmux(tmux),
            false,
            resumed,
            sandboxed,
            super::Timing {
                lifetime: super::Lifetime::from_stored(row.lifetime.as_deref()),
                since_ms: row.created_at,
                armed: true,
            },
        );
        tracing::info!(session_id = %row.id, sequence, "re-adopted a managed session");
        Ok(true)
    }
}

/// Where a session's numbering starts: a new one at zero, a re-adopted one where its
/// history left off.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resumed {
    /// The last sequence already numbered.
    pub sequence: u64,
    pub replay_floor: u64,
    /// Sequences up to this one are reserved in the store (see `actor::RESERVE_AHEAD`).
    pub reserved: u64,
}

/// The last sequence a session left by a previous process may have handed out: what it
/// stored, or what it had reserved, whichever is higher. Numbering goes on above it, so a
/// viewer never sees a number again with other content.
pub(super) fn numbered_upto(row: &SessionRow, frames: &[Frame]) -> u64 {
    let stored = frames.last().map_or(0, |f| f.sequence);
    row.last_sequence.max(stored).max(row.sequence_reserved)
}

/// Replays stored frames (from a keyframe on) into a fresh emulator.
pub fn rebuild_screen(frames: &[Frame], cols: u16, rows: u16) -> screen::Screen {
    let mut screen = screen::Screen::new(cols, rows);
    for f in frames {
        let text = match &f.body {
            FrameBody::Output { data, .. } => {
                screen.feed(data);
                continue;
            }
            FrameBody::Envelope { text, .. } => text,
        };
        let Ok(env) = serde_json::from_slice::<wire::Envelope>(text) else {
            continue;
        };
        match serde_json::from_value::<SessionFrame>(env.payload) {
            Ok(SessionFrame::Keyframe {
                snapshot,
                snapshot_cols,
                snapshot_rows,
                ..
            }) => {
                screen = screen::Screen::new(snapshot_cols, snapshot_rows);
                screen.feed(&snapshot.0);
            }
            Ok(SessionFrame::Output { data, .. }) => screen.feed(&data.0),
            Ok(SessionFrame::Resize { cols, rows }) => screen.resize(cols, rows),
            _ => {}
        }
    }
    screen
}
