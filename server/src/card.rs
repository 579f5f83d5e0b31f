//! The AgentCards: a pure A2A 1.0 card at the root well-known path and, per instance, a
//! superset card that also carries the 0.3 fields and the pty-ws `bindings[]` entry.
//! Both tell only what this server really does.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;

use serde::Serialize;
use wire::card::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
    BindingAd, FlowParams, HttpAuthScheme, LegacyInterface, PtyParams, ScopeList,
    SecurityRequirement, SecurityScheme, SupersetCard,
};

use crate::a2a::service::TaskService;
use crate::extensions::Declared;
use crate::sessions::host;
use crate::state::AppState;

/// The extensions the card declares, as requests on pty-ws and STDIO activate them.
pub fn extensions(tasks: &TaskService) -> Vec<Declared> {
    [PTY_EXTENSION, FLOW_EXTENSION, tasks.a202().declared()]
        .into_iter()
        .chain(tasks.agentic().declared(crate::agentic::Surface::Other))
        .collect()
}

const PTY_EXTENSION: Declared = Declared {
    uri: wire::EXTENSION_URI,
    required: false,
};

const FLOW_EXTENSION: Declared = Declared {
    uri: wire::FLOW_CONTROL_URI,
    required: false,
};

fn flow_extension() -> AgentExtension {
    AgentExtension::new(
        FLOW_EXTENSION.uri,
        "Output flow control on pty-ws/v1: a client that acknowledges what it has rendered (ptyhost.ack {sequence}) is sent at most window_bytes of output beyond it; past that its output is skipped and, once no more than resume_bytes is unacknowledged, it gets a keyframe. An ack may carry window_bytes to ask for a smaller window (at least min_window_bytes); the client then resumes at a quarter of it.",
        FLOW_EXTENSION.required,
        FlowParams {
            ack_op: wire::OP_ACK.to_owned(),
            window_bytes: wire::FLOW_WINDOW_BYTES,
            min_window_bytes: wire::MIN_WINDOW_BYTES,
            resume_bytes: wire::FLOW_RESUME_BYTES,
        },
    )
}

fn pty_extension(state: &AppState) -> AgentExtension {
    let s = state.sessions.settings();
    let names = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect();
    AgentExtension::new(
        PTY_EXTENSION.uri,
        "PTY roles (controller/observer), replay, membership and keyframes on the pty-ws/v1 binding.",
        PTY_EXTENSION.required,
        PtyParams {
            max_controllers: s.max_controllers,
            max_observers: s.max_observers,
            keyframe_interval_seconds: s.keyframe_interval.as_secs_f64(),
            keyframe_interval_frames: s.keyframe_frames,
            replay_buffer_frames: s.replay_frames,
            replay_buffer_retention_seconds: s.replay_retention.as_secs(),
            default_cols: s.default_cols,
            default_rows: s.default_rows,
            session_backends: names(host::backends()),
            session_classes: names(host::classes()),
        },
    )
}

/// The card's `capabilities.extensions`.
fn extension_entries(state: &AppState) -> Vec<AgentExtension> {
    let own = [
        pty_extension(state),
        flow_extension(),
        state.tasks.a202().declaration(),
    ];
    own.into_iter()
        .chain(state.tasks.agentic().card_entries())
        .collect()
}

/// What names MCP's Streamable HTTP transport in the superset card's `bindings`.
const MCP_BINDING_URI: &str =
    "https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http";

/// Where MCP is served over Streamable HTTP.
fn mcp_url(state: &AppState) -> String {
    format!("{}/mcp", state.base_url())
}

fn interface(url: String, binding: &str, version: &str) -> AgentInterface {
    AgentInterface {
        url,
        protocol_binding: binding.to_owned(),
        protocol_version: version.to_owned(),
    }
}

fn strings<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.map(str::to_owned).to_vec()
}

/// The pure A2A 1.0 card.
pub fn v1_card(state: &AppState) -> AgentCard {
    let base = state.base_url();
    let jsonrpc = format!("{base}/jsonrpc");
    AgentCard {
        name: "ptyhost".into(),
        description: "A terminal agent: runs PTY sessions that operators and agents attach to, watch and drive, and runs each A2A message as a command in a session's shell.".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![
            interface(base.clone(), "HTTP+JSON", "1.0"),
            interface(jsonrpc.clone(), "JSONRPC", "1.0"),
            interface(state.attach_url("{session_id}"), wire::BINDING_URI, "1.0"),
            interface(state.grpc_url(), "GRPC", "1.0"),
            interface(jsonrpc, "JSONRPC", "0.3"),
            interface(base, "HTTP+JSON", "0.3"),
        ],
        provider: AgentProvider {
            organization: "ptyhost".into(),
            url: state.public_url.clone(),
        },
        capabilities: AgentCapabilities {
            streaming: true,
            push_notifications: true,
            extended_agent_card: false,
            extensions: extension_entries(state),
        },
        security_schemes: BTreeMap::from([(
            "bearer".to_owned(),
            SecurityScheme {
                http_auth_security_scheme: HttpAuthScheme {
                    description: "A ptyhost token: pty:observe < pty:control < pty:admin.".into(),
                    scheme: "Bearer".into(),
                },
                kind: None,
                scheme: None,
            },
        )]),
        security_requirements: vec![SecurityRequirement {
            schemes: BTreeMap::from([("bearer".to_owned(), ScopeList::default())]),
        }],
        default_input_modes: strings(["text/plain", "application/json"]),
        default_output_modes: strings(["text/plain", "application/octet-stream"]),
        skills: vec![
            AgentSkill {
                id: "shell".into(),
                name: "Run a shell command".into(),
                description: "Runs the message as one command line in a session's shell (contextId = session id; none starts a new shell). A data part may give {argv, cwd, env, timeout_secs}. File parts (raw bytes, or a url when the server fetches them) are written into the session's working directory under their filename before the command runs; the history keeps a reference, not the bytes. A data part {outputs: [paths]} returns those files after the command as artifacts \"file:PATH\" (bytes up to 1 MiB, else a URL of the files route). The output is the artifact \"output\"; exit 0 completes the task, any other exit fails it with the exit code in metadata.".into(),
                tags: strings(["shell", "command", "terminal", "files"]),
                examples: strings(["ls -la", "make test", "sh script.sh (with script.sh as a file part)"]),
                input_modes: strings(["text/plain", "application/json", "application/octet-stream"]),
                output_modes: strings(["text/plain", "application/octet-stream"]),
            },
            AgentSkill {
                id: "terminal".into(),
                name: "Terminal sessions".into(),
                description: "Interactive PTY sessions: attach over pty-ws/v1 to watch live output, type as the controller, resize, and replay history after a reconnect.".into(),
                tags: strings(["terminal", "pty", "shell"]),
                examples: strings(["attach to a session and watch a build", "take control and run ls -la"]),
                input_modes: Vec::new(),
                output_modes: Vec::new(),
            },
            AgentSkill {
                id: "mcp".into(),
                name: "Terminal tools over MCP".into(),
                description: format!("The same sessions as Model Context Protocol tools (session_create, session_list, session_close, run, task_status, task_cancel, send_keys, read_screen, read_output, wait_for, file_read, file_write, file_list) and each session's screen as a resource ptyhost://sessions/{{session_id}}/screen: Streamable HTTP at {}, with the same bearer token and scopes; `ptyhost mcp` serves them on stdio.", mcp_url(state)),
                tags: strings(["mcp", "terminal", "shell"]),
                examples: strings(["run {\"command\": \"make test\"}", "wait_for {\"session_id\": \"…\", \"pattern\": \"ready\", \"timeout_ms\": 30000}"]),
                input_modes: Vec::new(),
                output_modes: Vec::new(),
            },
        ],
    }
}

fn with_cache(card: impl Serialize) -> Response {
    ([(header::CACHE_CONTROL, "max-age=60")], Json(card)).into_response()
}

pub async fn pure(State(state): State<AppState>) -> Response {
    with_cache(v1_card(&state))
}

/// The per-instance card: the 1.0 card, the pty-ws binding advertisement of the binding
/// spec (§10), and the 0.3 top-level fields.
pub async fn superset(State(state): State<AppState>) -> Response {
    let mut card = v1_card(&state);
    // 0.3 readers take OpenAPI-style schemes; 1.0 readers take the oneof key beside them.
    for scheme in card.security_schemes.values_mut() {
        scheme.kind = Some("http".into());
        scheme.scheme = Some("bearer".into());
    }
    let base = state.base_url();
    let jsonrpc = format!("{base}/jsonrpc");
    with_cache(SupersetCard {
        card,
        bindings: vec![
            BindingAd {
                uri: wire::BINDING_URI.into(),
                endpoint: state.attach_url("{session_id}"),
                preference: "secondary".into(),
                operations: wire::CORE_OPERATIONS.map(str::to_owned).to_vec(),
                notes: "Interactive PTY attach (subprotocol pty-ws.v1, bearer in Authorization or a bearer.<base64url> subprotocol entry). ListTasks is scoped to the attached session. Push notification configs are not carried here (UNSUPPORTED_OPERATION): use the HTTP+JSON or JSON-RPC interface.".into(),
            },
            BindingAd {
                uri: MCP_BINDING_URI.into(),
                endpoint: mcp_url(&state),
                preference: "secondary".into(),
                operations: Vec::new(),
                notes: "MCP over Streamable HTTP (protocol 2025-11-25 or 2026-07-28), bearer in Authorization: the terminal tools of the skill \"mcp\". Not an A2A interface.".into(),
            },
        ],
        protocol_version: "0.3.0".into(),
        url: jsonrpc.clone(),
        preferred_transport: "JSONRPC".into(),
        additional_interfaces: vec![
            LegacyInterface {
                url: jsonrpc,
                transport: "JSONRPC".into(),
            },
            LegacyInterface {
                url: base,
                transport: "HTTP+JSON".into(),
            },
        ],
        supports_authenticated_extended_card: false,
        security: vec![BTreeMap::from([("bearer".to_owned(), Vec::new())])],
    })
}
