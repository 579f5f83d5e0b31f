//! The audit trail: observer attaches, refused writes, role changes and share-link use,
//! as structured tracing events (target `audit`) and rows in the `audit` table. Records
//! name tokens by id only; callers never pass a token's value. Recording never waits for
//! the disk: rows are written behind by one task, in order.

use serde::Serialize;
use tokio::sync::mpsc;

pub use wire::control::AuditDetail as Detail;

use crate::clock;
use crate::store::{AuditRow, Store};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A pty-ws connection was opened (detail: scope, subprotocol, share link or not).
    Attach,
    /// A member joined as observer.
    ObserverJoined,
    /// Input, a resize or the controller role was refused for lack of scope or role.
    WriteDenied,
    /// A member's role changed (detail: from, to, why).
    RoleChanged,
    ShareLinkCreated,
    /// A share link's token authenticated a request or connection.
    ShareLinkUsed,
    ShareLinkRevoked,
    /// An open connection or stream was cut because its token was revoked or expired
    /// (detail: what was cut, why).
    ConnectionCut,
    /// A file was written into a session's working directory (detail: path, bytes, via).
    FileWritten,
    /// A file was read (detail: path, bytes, via).
    FileRead,
    FileDeleted,
    /// A connection through a session's egress proxy ended (detail: target, bytes).
    Egress,
    /// A session's egress proxy refused a target (detail: target, the allowlist).
    EgressDenied,
    /// A session's egress allowlist changed (detail: from, to).
    EgressChanged,
    /// A request through a port preview (detail: port, method, path, status).
    PortPreview,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::Attach => "attach",
            Event::ObserverJoined => "observer_joined",
            Event::WriteDenied => "write_denied",
            Event::RoleChanged => "role_changed",
            Event::ShareLinkCreated => "share_link_created",
            Event::ShareLinkUsed => "share_link_used",
            Event::ShareLinkRevoked => "share_link_revoked",
            Event::ConnectionCut => "connection_cut",
            Event::FileWritten => "file_written",
            Event::FileRead => "file_read",
            Event::FileDeleted => "file_deleted",
            Event::Egress => "egress",
            Event::EgressDenied => "egress_denied",
            Event::EgressChanged => "egress_changed",
            Event::PortPreview => "port_preview",
        }
    }
}

/// One record. `token_id` is a token's id, never its value.
#[derive(Debug, Clone)]
pub struct Record {
    pub event: Event,
    pub session_id: Option<String>,
    pub token_id: Option<String>,
    pub client_id: Option<String>,
    pub detail: Detail,
}

impl Record {
    pub fn new(event: Event, session_id: &str) -> Record {
        Record {
            event,
            session_id: Some(session_id.to_owned()),
            token_id: None,
            client_id: None,
            detail: Detail::Nothing {},
        }
    }

    pub fn by(mut self, token_id: &str) -> Record {
        self.token_id = Some(token_id.to_owned());
        self
    }

    pub fn client(mut self, client_id: &str) -> Record {
        self.client_id = Some(client_id.to_owned());
        self
    }

    pub fn detail(mut self, detail: Detail) -> Record {
        self.detail = detail;
        self
    }
}

#[derive(Clone)]
pub struct Audit {
    tx: mpsc::UnboundedSender<AuditRow>,
}

impl Audit {
    /// Starts the writer; it ends when every `Audit` is dropped.
    pub fn start(store: Store) -> Audit {
        let (tx, mut rx) = mpsc::unbounded_channel::<AuditRow>();
        tokio::spawn(async move {
            while let Some(row) = rx.recv().await {
                if let Err(e) = store.records().insert_audit(&row).await {
                    tracing::error!(error = %format!("{e:#}"), event = %row.event, "writing an audit record failed");
                }
            }
        });
        Audit { tx }
    }

    pub fn record(&self, r: Record) {
        let detail = serde_json::to_string(&r.detail).unwrap_or_default();
        tracing::info!(
            target: "audit",
            event = r.event.name(),
            session_id = r.session_id.as_deref().unwrap_or(""),
            token_id = r.token_id.as_deref().unwrap_or(""),
            client_id = r.client_id.as_deref().unwrap_or(""),
            detail = %detail,
        );
        let _ = self.tx.send(AuditRow {
            at: clock::now_ms(),
            event: r.event.name().to_owned(),
            session_id: r.session_id,
            token_id: r.token_id,
            client_id: r.client_id,
            detail,
        });
    }
}
