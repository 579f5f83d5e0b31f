//! A202 commercial extension (A2A carrier binding v0.1): this agent declares the extension
//! in its AgentCard and preflight document, receives A202 objects as raw message parts over
//! A2A or as request bodies over plain HTTPS, verifies them as received, and appends them
//! to per-transaction streams in SQLite. A carrier event — a task that fails or is canceled,
//! a dropped stream — never touches a stream: only accepted objects do.

pub mod canonical;
pub mod capability;
pub mod keys;
pub mod object;
pub mod seal;

use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use wire::a2a::{Content, Message};
use wire::card::AgentExtension;

use crate::extensions::Declared;
use crate::store::{A202Row, Store};
use canonical::Kernel;
use capability::Versions;
use object::{SignatureCheck, Verified};

/// The v0.1 extension URI (binding §2.2).
pub const URI: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
/// The media type of an object's canonical bytes.
pub const MEDIA_TYPE: &str = "application/a202-commercial+json";
/// The plain-HTTPS activation header (binding §7.2).
pub const HTTP_HEADER: &str = "a202-extensions";

/// A refusal, named by its code in the A202 registry (a kernel validation refusal has none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum A202Refusal {
    #[error("A202-EXTENSION-UNSUPPORTED: the A202 commercial extension is not in effect")]
    ExtensionUnsupported,
    #[error("kernel validation refusal: {0}")]
    Kernel(String),
    #[error("A202-HASH-FORMAT-INVALID: content_hash is not 64 lowercase hexadecimal characters")]
    HashFormat,
    #[error(
        "A202-EVIDENCE-HASH-MISMATCH: content_hash {declared} is not the object's hash {computed}"
    )]
    HashMismatch { declared: String, computed: String },
    #[error("A202-EVIDENCE-SIGNATURE-INVALID: {0}")]
    SignatureInvalid(String),
    #[error(
        "A202-ANNOTATION-FORGED: kernel_annotations are written by the receiving control plane, never sent"
    )]
    AnnotationForged,
    #[error("A202-STREAM-MISMATCH: {0}")]
    StreamMismatch(String),
    #[error("A202-SEQUENCE-CONFLICT: {detail}; the stream is at sequence {current}")]
    SequenceConflict { current: i64, detail: String },
    #[error("A202-ENDPOINT-INSECURE: A202 objects travel over HTTPS only")]
    EndpointInsecure,
}

const HASH_FORMAT: &str = "A202-HASH-FORMAT-INVALID";
const HASH_MISMATCH: &str = "A202-EVIDENCE-HASH-MISMATCH";
const SIGNATURE_INVALID: &str = "A202-EVIDENCE-SIGNATURE-INVALID";
const ANNOTATION_FORGED: &str = "A202-ANNOTATION-FORGED";
const STREAM_MISMATCH: &str = "A202-STREAM-MISMATCH";
const SEQUENCE_CONFLICT: &str = "A202-SEQUENCE-CONFLICT";
const ENDPOINT_INSECURE: &str = "A202-ENDPOINT-INSECURE";

/// Every registry code a refusal here carries.
pub const CODES: [&str; 8] = [
    capability::Unsupported::CODE,
    HASH_FORMAT,
    HASH_MISMATCH,
    SIGNATURE_INVALID,
    ANNOTATION_FORGED,
    STREAM_MISMATCH,
    SEQUENCE_CONFLICT,
    ENDPOINT_INSECURE,
];

impl A202Refusal {
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            A202Refusal::ExtensionUnsupported => capability::Unsupported::CODE,
            A202Refusal::Kernel(_) => return None,
            A202Refusal::HashFormat => HASH_FORMAT,
            A202Refusal::HashMismatch { .. } => HASH_MISMATCH,
            A202Refusal::SignatureInvalid(_) => SIGNATURE_INVALID,
            A202Refusal::AnnotationForged => ANNOTATION_FORGED,
            A202Refusal::StreamMismatch(_) => STREAM_MISMATCH,
            A202Refusal::SequenceConflict { .. } => SEQUENCE_CONFLICT,
            A202Refusal::EndpointInsecure => ENDPOINT_INSECURE,
        })
    }

    /// The refusal as JSON: its code (null for a kernel validation refusal), the kind, the
    /// message, and a sequence conflict's current sequence.
    pub fn body(&self) -> RefusalBody {
        RefusalBody {
            code: self.code(),
            refusal: if self.code().is_some() {
                "registry"
            } else {
                "kernel_validation"
            },
            message: self.to_string(),
            current_sequence: match self {
                A202Refusal::SequenceConflict { current, .. } => Some(*current),
                _ => None,
            },
        }
    }
}

/// A refusal as the HTTPS binding answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusalBody {
    pub code: Option<&'static str>,
    /// `registry` (a registry code) or `kernel_validation`.
    pub refusal: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_sequence: Option<i64>,
}

/// The preflight document: this agent's declaration of the extension.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preflight {
    pub extensions: Vec<AgentExtension>,
}

/// A transaction's stream (`GET /a202/transactions/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transaction {
    pub transaction_id: String,
    pub sequence: i64,
    pub objects: Vec<StreamEntry>,
}

/// One object of a transaction's stream; offers carry their status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEntry {
    pub sequence: i64,
    pub id: String,
    pub object_type: String,
    pub version: i64,
    pub content_hash: String,
    pub received_at: String,
    pub carrier: String,
    /// `open`, `expired` or `superseded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
}

/// Why an object was not taken: a refusal, or a store that failed (nothing was appended).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Refused(#[from] A202Refusal),
    #[error("the A202 store failed: {0:#}")]
    Store(#[from] anyhow::Error),
}

/// What a received object became.
#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    pub id: String,
    pub object_type: String,
    pub version: i64,
    pub transaction_id: Option<String>,
    pub content_hash: String,
    /// Its place in its transaction's stream.
    pub sequence: i64,
    /// The stream already held these exact bytes: nothing was appended.
    pub duplicate: bool,
    pub signatures: Vec<SignatureCheck>,
}

/// How an object reached us (recorded, never used to correlate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    A2a,
    Https,
}

impl Carrier {
    fn label(self) -> &'static str {
        match self {
            Carrier::A2a => "a2a",
            Carrier::Https => "https",
        }
    }
}

#[derive(Clone)]
pub struct A202 {
    inner: Arc<Inner>,
}

struct Inner {
    versions: Versions,
    required: bool,
    kernel: Kernel,
    keys: keys::Keyring,
    store: Store,
    /// Appends are decided one batch at a time: sequence checks and the insert together.
    append: tokio::sync::Mutex<()>,
}

/// How this agent takes part in A202 (the `--a202-*` flags).
#[derive(Debug, Clone)]
pub struct A202Settings {
    /// Every A2A request must activate the extension.
    pub required: bool,
    pub versions: Versions,
    /// Trusted key records (a JSON array of key_record objects).
    pub keys: Option<std::path::PathBuf>,
}

impl A202 {
    pub fn new(args: &A202Settings, store: Store) -> Result<A202> {
        let versions = args.versions.clone();
        let kernel = Kernel::default();
        let keys = match &args.keys {
            Some(path) => keys::Keyring::load(path, &kernel)?,
            None => keys::Keyring::default(),
        };
        tracing::info!(
            keys = keys.count(),
            required = args.required,
            "A202 extension ready"
        );
        Ok(A202 {
            inner: Arc::new(Inner {
                versions,
                required: args.required,
                kernel,
                keys,
                store,
                append: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The extension as requests activate it.
    pub fn declared(&self) -> Declared {
        Declared {
            uri: URI,
            required: self.inner.required,
        }
    }

    /// The AgentCard's `capabilities.extensions` entry (binding §2.1).
    pub fn declaration(&self) -> AgentExtension {
        AgentExtension::new(
            URI,
            "Exchanges A202 commercial objects: one object per raw part (application/a202-commercial+json, RFC 8785 bytes), transaction_id in message metadata under this URI; also POST /a202/objects over HTTPS.",
            self.inner.required,
            &self.inner.versions,
        )
    }

    /// The plain-HTTPS preflight document (binding §7.2).
    pub fn preflight(&self) -> Preflight {
        Preflight {
            extensions: vec![self.declaration()],
        }
    }

    /// Verifies one object's bytes as received.
    pub fn verify(&self, bytes: &[u8]) -> Result<Verified, A202Refusal> {
        object::verify(&self.inner.kernel, &self.inner.keys, bytes)
    }

    /// The A202 objects a message carries, verified, or `None` when it carries none. Each
    /// is a raw part with the A202 media type; a data part with that type is a reader's
    /// view and is never the object. The message must have activated the extension, and a
    /// transaction-bound object must name the transaction its extension payload names.
    pub fn inbound(
        &self,
        message: &Message,
        activated: bool,
    ) -> Result<Option<Vec<Verified>>, A202Refusal> {
        let parts: Vec<_> = message
            .parts
            .iter()
            .filter(|p| p.media_type.as_deref() == Some(MEDIA_TYPE))
            .collect();
        if parts.is_empty() {
            return Ok(None);
        }
        if !activated {
            return Err(A202Refusal::ExtensionUnsupported);
        }
        let mut objects = Vec::new();
        for part in parts {
            match &part.content {
                Content::Raw(bytes) => objects.push(self.verify(bytes)?),
                Content::Data(_) => {}
                _ => {
                    return Err(A202Refusal::Kernel(
                        "an A202 object travels as the raw bytes of a part, not as text or a URL"
                            .into(),
                    ));
                }
            }
        }
        if objects.is_empty() {
            return Err(A202Refusal::Kernel(
                "a structured view is not the object: send its canonical bytes as a raw part"
                    .into(),
            ));
        }
        let named = message
            .metadata
            .as_ref()
            .and_then(|m| m.get(URI))
            .and_then(|p| p.get("transaction_id"))
            .and_then(Value::as_str);
        for object in &objects {
            if object.transaction_id.as_deref() != named {
                return Err(A202Refusal::StreamMismatch(format!(
                    "the message's extension payload names transaction {} but object {} belongs to {}",
                    named.unwrap_or("none"),
                    object.id,
                    object.transaction_id.as_deref().unwrap_or("none"),
                )));
            }
        }
        Ok(Some(objects))
    }

    /// Appends verified objects to their transactions' streams, all or none. An object the
    /// stream already holds byte for byte is a duplicate (receipted, not appended); the
    /// same id and version with other bytes, or an action envelope whose
    /// `expected_sequence` is not its stream's sequence, is a sequence conflict.
    pub async fn append(
        &self,
        objects: Vec<Verified>,
        carrier: Carrier,
    ) -> Result<Vec<Receipt>, Error> {
        let _turn = self.inner.append.lock().await;
        let store = &self.inner.store;
        let mut rows: Vec<A202Row> = Vec::new();
        let mut receipts = Vec::new();
        for object in objects {
            let stream = object.transaction_id.clone().unwrap_or_default();
            let pending = rows.iter().filter(|r| r.transaction_id == stream).count() as i64;
            let current = store.records().a202_sequence(&stream).await? + pending;
            let held = match rows
                .iter()
                .find(|r| r.object_id == object.id && r.version == object.version)
            {
                Some(r) => Some((r.sequence, r.content_hash.clone())),
                None => {
                    store
                        .records()
                        .a202_find(&object.id, object.version)
                        .await?
                }
            };
            let (sequence, duplicate) = match held {
                Some((sequence, hash)) if hash == object.content_hash => (sequence, true),
                Some(_) => {
                    return Err(A202Refusal::SequenceConflict {
                        current,
                        detail: format!(
                            "{} version {} is already in a stream with other content",
                            object.id, object.version
                        ),
                    }
                    .into());
                }
                None => {
                    if let Some(expected) = object.expected_sequence.filter(|e| *e != current) {
                        return Err(A202Refusal::SequenceConflict {
                            current,
                            detail: format!("the action expected sequence {expected}"),
                        }
                        .into());
                    }
                    rows.push(A202Row {
                        transaction_id: stream,
                        sequence: current + 1,
                        object_id: object.id.clone(),
                        version: object.version,
                        object_type: object.object_type.clone(),
                        content_hash: object.content_hash.clone(),
                        canonical: object.canonical.clone(),
                        carrier: carrier.label().into(),
                        received_at: crate::clock::now_rfc3339(),
                    });
                    (current + 1, false)
                }
            };
            tracing::info!(object = %object.id, transaction = ?object.transaction_id, sequence, duplicate, carrier = carrier.label(), "A202 object accepted");
            receipts.push(Receipt {
                id: object.id,
                object_type: object.object_type,
                version: object.version,
                transaction_id: object.transaction_id,
                content_hash: object.content_hash,
                sequence,
                duplicate,
                signatures: object.signatures,
            });
        }
        store.records().a202_append(&rows).await?;
        Ok(receipts)
    }

    /// A transaction's stream as its objects and, for offers, their status: `open` until
    /// `valid_until`, then `expired`; `superseded` once a later offer in the stream names it.
    pub async fn transaction(&self, id: &str) -> Result<Option<Transaction>> {
        let rows = self.inner.store.records().a202_stream(id).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let parsed: Vec<Value> = rows
            .iter()
            .map(|r| serde_json::from_slice(&r.canonical).context("a stored object is not JSON"))
            .collect::<Result<_>>()?;
        let now = time::OffsetDateTime::now_utc();
        let objects = rows
            .iter()
            .zip(&parsed)
            .map(|(row, object)| {
                let mut entry = StreamEntry {
                    sequence: row.sequence,
                    id: row.object_id.clone(),
                    object_type: row.object_type.clone(),
                    version: row.version,
                    content_hash: row.content_hash.clone(),
                    received_at: row.received_at.clone(),
                    carrier: row.carrier.clone(),
                    status: None,
                };
                if row.object_type == "offer" {
                    let superseded = parsed.iter().any(|o| {
                        o["object_type"] == "offer"
                            && o["payload"]["supersedes_offer_id"] == object["id"]
                    });
                    let expired = object["payload"]["valid_until"]
                        .as_str()
                        .and_then(keys::timestamp)
                        .is_some_and(|until| until <= now);
                    entry.status = Some(match (superseded, expired) {
                        (true, _) => "superseded",
                        (false, true) => "expired",
                        (false, false) => "open",
                    });
                }
                entry
            })
            .collect();
        Ok(Some(Transaction {
            transaction_id: id.to_owned(),
            sequence: rows.last().map_or(0, |r| r.sequence),
            objects,
        }))
    }
}
