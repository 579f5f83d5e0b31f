//! The agentic-sandbox executor's four A2A extensions, as ptyhost implements them:
//! - `runtime/v1`: what this instance runs sessions in, on the card and on every Task;
//! - `idempotency/v1` (`idempotency`): a send retried with its message id gets the first
//!   response again and runs nothing;
//! - `hitl-prompt/v1` (`hitl`): an INPUT_REQUIRED task carries a prompt envelope, and its
//!   answer is checked against the envelope's schema;
//! - `multi-tenant/v1` (`tenant`): `metadata.tenant_id`, validated and echoed (declared:
//!   nothing is scoped by it).
//!
//! `--profile agentic-sandbox` declares `runtime/v1` and `idempotency/v1` required, as the
//! executor's production card does; otherwise all four are optional.

pub mod hitl;
pub mod idempotency;
pub mod tenant;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use wire::card::AgentExtension;

use crate::extensions::Declared;
use crate::store::Store;

pub const RUNTIME_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/runtime/v1";
pub const IDEMPOTENCY_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/idempotency/v1";
pub const HITL_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1";
pub const TENANT_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/multi-tenant/v1";

/// How the card presents this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// ptyhost's own card: the four extensions optional.
    Ptyhost,
    /// Shaped like the agentic-sandbox executor's production card: `runtime/v1` and
    /// `idempotency/v1` required, and `GET /health`.
    AgenticSandbox,
}

/// Where a request comes in, as the extensions see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// HTTP+JSON and JSON-RPC.
    Http,
    /// gRPC, pty-ws and STDIO.
    Other,
}

/// What the extensions need to know of the server.
#[derive(Debug, Clone)]
pub struct ExtensionSettings {
    pub profile: Profile,
    /// How long a send's response is replayed to a retry.
    pub idempotency_ttl: Duration,
    /// Sessions run sandboxed unless asked otherwise.
    pub sandboxed: bool,
    /// What a message does here: the executor's name (`shell`, `conformance`).
    pub loadout: &'static str,
}

/// What `runtime/v1` says the runtime provides: only what ptyhost does.
const CAPABILITIES: [&str; 6] = [
    "pty.attach",
    "pty.observe",
    "pty.replay",
    "session.files",
    "task.cancel",
    "warm_pool.manage",
];

/// What a sandboxed session's workspace makes possible besides (snapshots need one).
const WORKSPACE_CAPABILITIES: [&str; 3] =
    ["instance.snapshot", "instance.restore", "instance.fork"];

/// The provider of ptyhost's runtime kinds: its own sandbox, or the host's processes.
const PROVIDER: &str = "ptyhost";

/// `runtime/v1`'s card params.
#[derive(Serialize)]
struct RuntimeParams<'a> {
    runtime: &'static str,
    provider: &'static str,
    loadout: &'static str,
    instance_id: &'a str,
    capabilities: Vec<&'static str>,
}

/// `idempotency/v1`'s card params.
#[derive(Serialize)]
struct IdempotencyParams {
    ttl_seconds: u64,
    canonicalization: &'static str,
    hash_algorithm: &'static str,
}

/// `tenant/v1`'s card params.
#[derive(Serialize)]
struct TenantParams {
    enforcement: &'static str,
    default_tenant: &'static str,
    quota_response: QuotaResponse,
}

#[derive(Serialize)]
struct QuotaResponse {
    status: u16,
    header: &'static str,
}

#[derive(Clone)]
pub struct Agentic {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ExtensionSettings,
    /// `runtime/v1`'s instance id: a UUID made once per instance and kept in the store,
    /// the same on every node.
    instance_uuid: String,
    idempotency: idempotency::Cache,
}

impl Agentic {
    /// The extensions of node `node_id` of instance `instance_id`.
    pub async fn start(
        store: &Store,
        (instance_id, node_id): (&str, &str),
        settings: ExtensionSettings,
    ) -> anyhow::Result<Agentic> {
        let fresh = uuid::Uuid::new_v4().to_string();
        let name = format!("runtime/v1 instance_id of {instance_id}");
        let instance_uuid = store.nodes().cluster_value(&name, &fresh).await?;
        let idempotency =
            idempotency::Cache::start(store.clone(), settings.idempotency_ttl, node_id).await?;
        Ok(Agentic {
            inner: Arc::new(Inner {
                settings,
                instance_uuid,
                idempotency,
            }),
        })
    }

    /// The runtime's capabilities: exactly those that work on this server.
    fn capabilities(&self) -> Vec<&'static str> {
        let workspaces = match self.inner.settings.sandboxed {
            true => &WORKSPACE_CAPABILITIES[..],
            false => &[],
        };
        CAPABILITIES.iter().chain(workspaces).copied().collect()
    }

    pub fn profile(&self) -> Profile {
        self.inner.settings.profile
    }

    pub fn idempotency(&self) -> &idempotency::Cache {
        &self.inner.idempotency
    }

    /// The extensions as requests on `surface` activate them: on HTTP+JSON and JSON-RPC,
    /// the executor's own surfaces, all four, with the profile's required; elsewhere
    /// (gRPC, pty-ws, STDIO) all but `idempotency/v1`, which only those two implement,
    /// and none required.
    pub fn declared(&self, surface: Surface) -> Vec<Declared> {
        let required = surface == Surface::Http && self.profile() == Profile::AgenticSandbox;
        let mut declared = vec![
            Declared {
                uri: RUNTIME_URI,
                required,
            },
            Declared {
                uri: IDEMPOTENCY_URI,
                required,
            },
            Declared {
                uri: HITL_URI,
                required: false,
            },
            Declared {
                uri: TENANT_URI,
                required: false,
            },
        ];
        if surface == Surface::Other {
            declared.retain(|d| d.uri != IDEMPOTENCY_URI);
        }
        declared
    }

    /// The runtime kind of a session: `container` when it is sandboxed.
    fn kind(confined: bool) -> &'static str {
        if confined { "container" } else { "host" }
    }

    /// Their entries in the card's `capabilities.extensions`.
    pub fn card_entries(&self) -> Vec<AgentExtension> {
        let s = &self.inner.settings;
        let [runtime, idempotency, hitl, tenant] = self.declared(Surface::Http)[..] else {
            unreachable!("HTTP declares all four")
        };
        vec![
            AgentExtension::new(
                runtime.uri,
                "What this instance runs sessions in: container when each session is sandboxed (its own namespaces, minimal root, Landlock, seccomp, cgroup caps), host when not. Every Task carries runtime.instance_id and runtime.kind (its session's own).",
                runtime.required,
                RuntimeParams {
                    runtime: Self::kind(s.sandboxed),
                    provider: PROVIDER,
                    loadout: s.loadout,
                    instance_id: &self.inner.instance_uuid,
                    capabilities: self.capabilities(),
                },
            ),
            AgentExtension::new(
                idempotency.uri,
                "Server-side deduplication of SendMessage and SendStreamingMessage on HTTP+JSON and JSON-RPC, keyed on Message.messageId and bound to the SHA-256 of the JCS-canonical request without it; the cache is in the store, so it survives restarts and is shared by a cluster's nodes.",
                idempotency.required,
                IdempotencyParams {
                    ttl_seconds: s.idempotency_ttl.as_secs(),
                    canonicalization: "jcs-rfc8785",
                    hash_algorithm: "sha-256",
                },
            ),
            AgentExtension::new(
                hitl.uri,
                "A task that waits for input carries a prompt envelope (prompt_id, the line the command waits on, response_schema {text}); a message with metadata.hitl_response_for answers it with that text.",
                hitl.required,
                Map::new(),
            ),
            AgentExtension::new(
                tenant.uri,
                "Carries an opaque tenant_id on Message.metadata, validated and echoed on every emitted Message and status update; declared: nothing is scoped by it.",
                tenant.required,
                TenantParams {
                    enforcement: "declared",
                    default_tenant: tenant::DEFAULT,
                    quota_response: QuotaResponse {
                        status: 429,
                        header: "Retry-After",
                    },
                },
            ),
        ]
    }

    /// What a new task carries and does for the extensions its message activated, or the
    /// refusal of a `tenant_id` that is not one. `confined`: whether its work runs in a
    /// sandboxed session (`None`: no session runs it; the instance's kind stands).
    pub fn stamp(
        &self,
        message: &wire::a2a::Message,
        extensions: &[&'static str],
        confined: Option<bool>,
    ) -> Stamp {
        let kind = Self::kind(confined.unwrap_or(self.inner.settings.sandboxed));
        let mut metadata = Map::new();
        metadata.insert(
            "runtime.instance_id".into(),
            Value::from(self.inner.instance_uuid.as_str()),
        );
        metadata.insert("runtime.kind".into(), Value::from(kind));
        metadata.insert("runtime.provider".into(), Value::from(PROVIDER));
        metadata.insert(
            "runtime.capabilities".into(),
            Value::from(self.capabilities()),
        );
        let tenant = tenant::of(message)
            .ok()
            .flatten()
            .map(str::to_owned)
            .or_else(|| {
                extensions
                    .contains(&TENANT_URI)
                    .then(|| tenant::DEFAULT.to_owned())
            });
        if let Some(t) = &tenant {
            metadata.insert(tenant::KEY.into(), Value::from(t.as_str()));
        }
        Stamp {
            metadata,
            tenant,
            hitl: extensions.contains(&HITL_URI),
        }
    }
}

/// What a task carries for the extensions: metadata from its start, and what each of its
/// status messages gets.
#[derive(Debug, Clone, Default)]
pub struct Stamp {
    pub metadata: Map<String, Value>,
    /// `multi-tenant/v1`: echoed on every message the task emits.
    pub tenant: Option<String>,
    /// `hitl-prompt/v1` was activated: an INPUT_REQUIRED status carries an envelope.
    pub hitl: bool,
}

impl Stamp {
    /// Stamps a message the task emits: its tenant.
    pub fn message(&self, message: &mut wire::a2a::Message) {
        if let Some(t) = &self.tenant {
            let metadata = message.metadata.get_or_insert_with(Map::new);
            metadata.insert(tenant::KEY.into(), Value::from(t.as_str()));
        }
    }

    /// Stamps a new status: the tenant on its message, and a prompt envelope on an
    /// INPUT_REQUIRED one.
    pub fn status(&self, status: &mut wire::a2a::TaskStatus) {
        let Some(message) = status.message.as_mut() else {
            return;
        };
        self.message(message);
        if self.hitl && status.state == wire::a2a::TaskState::InputRequired {
            let envelope = hitl::envelope(&message.text());
            let metadata = message.metadata.get_or_insert_with(Map::new);
            metadata.insert(HITL_URI.into(), envelope);
        }
    }
}

/// A refusal an extension defines in its own codes: an HTTP status, a JSON-RPC code and
/// message, and the `data` the extension's error carries.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct ExtensionRefusal {
    pub http: u16,
    pub jsonrpc: i64,
    /// The JSON-RPC message the extension prescribes (`hitl_response_invalid`).
    pub jsonrpc_message: &'static str,
    /// The stable code clients dispatch on (the ErrorInfo reason).
    pub reason: &'static str,
    pub detail: String,
    pub data: Value,
}
