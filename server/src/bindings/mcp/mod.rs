//! The MCP binding: the terminal tools coding agents ask for, over the official Rust SDK
//! (`rmcp`), on stdio (`ptyhost mcp`) and Streamable HTTP (`B/mcp`, in `http`). One tool set
//! for both: `tools` (sessions and commands, through the task service as every A2A binding
//! runs them), `screen` (keys, the screen, output since a cursor, waits) and `files` (the
//! files API's rules), with `text` turning terminal bytes into plain text and key names into
//! bytes. Each session's screen is also a resource a client may subscribe to.

mod files;
pub mod http;
mod screen;
mod text;
mod tools;

use crate::sessions::SessionId;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::a2a::A2aError;
use crate::a2a::service::TaskService;
use crate::auth::{Principal, Scope};
use crate::sessions::{SessionHandle, Sessions};

/// What the tools work on, shared by every MCP connection of a process.
pub struct Terminals {
    pub sessions: Sessions,
    pub tasks: TaskService,
    pub files: crate::files::FileSettings,
    /// Where the web UI is served (`ui_url`s start here); `None` when nothing serves it.
    pub ui_base: Option<String>,
    /// Each token's pooled shell, kept for its next `run` without a `session_id`, and the
    /// last task it ran there.
    shells: Mutex<HashMap<String, (String, String)>>,
}

impl Terminals {
    pub fn new(
        sessions: Sessions,
        tasks: TaskService,
        files: crate::files::FileSettings,
        ui_base: Option<String>,
    ) -> Arc<Terminals> {
        Arc::new(Terminals {
            sessions,
            tasks,
            files,
            ui_base,
            shells: Mutex::new(HashMap::new()),
        })
    }

    fn ui_url(&self, sid: &str) -> Option<String> {
        (self.ui_base.as_ref()).map(|b| format!("{}/sessions/{sid}", b.trim_end_matches('/')))
    }

    /// The running session `sid`, when `who` may see it.
    fn live(&self, who: &Principal, sid: &str) -> Result<SessionHandle, ToolError> {
        (self.sessions.live(&SessionId::from(sid)))
            .filter(|_| who.sees_session(sid))
            .ok_or_else(|| ToolError::new("NOT_FOUND", format!("no running session {sid}")))
    }
}

/// Who calls: one principal for the whole connection (stdio hosting its own sessions), or
/// the bearer token of each HTTP request (`http` puts its principal in the request).
#[derive(Clone)]
pub enum Caller {
    Fixed(Principal),
    Bearer,
}

/// The principal `ptyhost mcp` acts as for the process that started it.
pub fn local_principal() -> Principal {
    Principal {
        token_id: "mcp-stdio".into(),
        scope: Scope::Admin,
        session_id: None,
        label: Some("ptyhost mcp".into()),
        share_link: false,
    }
}

/// A tool call that did not do what it was asked: an `isError` result whose text names a
/// google.rpc code (`NOT_FOUND`, `PERMISSION_DENIED`, `INVALID_ARGUMENT`, …), as the files
/// API and A2A's HTTP errors do, and says why.
#[derive(Debug)]
pub struct ToolError {
    code: &'static str,
    message: String,
}

impl ToolError {
    fn new(code: &'static str, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new("INVALID_ARGUMENT", message)
    }

    fn internal(e: anyhow::Error) -> ToolError {
        tracing::error!(error = %format!("{e:#}"), "MCP tool call failed");
        ToolError::new("INTERNAL", "internal error")
    }
}

impl From<A2aError> for ToolError {
    fn from(e: A2aError) -> ToolError {
        ToolError::new(e.http().1, e.to_string())
    }
}

impl From<crate::files::FileError> for ToolError {
    fn from(e: crate::files::FileError) -> ToolError {
        ToolError::new(e.code, e.message)
    }
}

impl rmcp::handler::server::tool::IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let text = format!("{}: {}", self.code, self.message);
        Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into())
    }
}

/// One MCP connection's server: the tools, and the screens as resources.
#[derive(Clone)]
pub struct Terminal {
    terminals: Arc<Terminals>,
    caller: Caller,
    tool_router: ToolRouter<Terminal>,
    /// Legacy `resources/subscribe` watchers, by URI.
    subscriptions: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl Terminal {
    pub fn new(terminals: Arc<Terminals>, caller: Caller) -> Terminal {
        Terminal {
            terminals,
            caller,
            tool_router: TOOLS.clone(),
            subscriptions: Arc::default(),
        }
    }

    /// Who makes this request.
    fn who(&self, ctx: &RequestContext<RoleServer>) -> Result<Principal, ToolError> {
        match &self.caller {
            Caller::Fixed(p) => Ok(p.clone()),
            Caller::Bearer => (ctx.extensions.get::<axum::http::request::Parts>())
                .and_then(|parts| parts.extensions.get::<Principal>().cloned())
                .ok_or_else(|| ToolError::new("UNAUTHENTICATED", "no bearer token")),
        }
    }

    /// Who makes this request, when it may do what needs `needed`.
    fn allowed(
        &self,
        ctx: &RequestContext<RoleServer>,
        needed: Scope,
        what: &str,
    ) -> Result<Principal, ToolError> {
        let who = self.who(ctx)?;
        if who.scope < needed {
            return Err(ToolError::new(
                "PERMISSION_DENIED",
                format!("{what} needs {needed}; the token has {}", who.scope),
            ));
        }
        Ok(who)
    }
}

/// Every tool, with its schemas, made once.
static TOOLS: LazyLock<ToolRouter<Terminal>> = LazyLock::new(|| {
    let mut tools = Terminal::session_tools() + Terminal::screen_tools() + Terminal::file_tools();
    for route in tools.map.values_mut() {
        drop_number_formats(Arc::make_mut(&mut route.attr.input_schema));
        if let Some(output) = route.attr.output_schema.as_mut() {
            drop_number_formats(Arc::make_mut(output));
        }
    }
    tools
});

/// Takes out schemars' integer and float formats (`uint64`, `double`, …): JSON Schema
/// defines none of them, and strict validators (the TypeScript SDK's Ajv) warn of each.
fn drop_number_formats(schema: &mut JsonObject) {
    const NUMBERS: [&str; 11] = [
        "uint", "uint8", "uint16", "uint32", "uint64", "int", "int16", "int32", "int64", "float",
        "double",
    ];
    if (schema.get("format").and_then(Value::as_str)).is_some_and(|f| NUMBERS.contains(&f)) {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        match value {
            Value::Object(o) => drop_number_formats(o),
            Value::Array(items) => {
                (items.iter_mut().filter_map(Value::as_object_mut)).for_each(drop_number_formats)
            }
            _ => {}
        }
    }
}

/// A call waits this long at most (`yield_ms`, `wait_ms`, `timeout_ms` of `wait_for`).
const MAX_WAIT: Duration = Duration::from_secs(600);

/// The wait a caller asked for in milliseconds (or `default`), within `MAX_WAIT`.
fn wait(ms: Option<u64>, default: Duration) -> Duration {
    ms.map_or(default, Duration::from_millis).min(MAX_WAIT)
}

/// `ptyhost://sessions/{sid}/screen`
fn screen_uri(sid: &str) -> String {
    format!("ptyhost://sessions/{sid}/screen")
}

fn uri_session(uri: &str) -> Option<&str> {
    let sid = uri
        .strip_prefix("ptyhost://sessions/")?
        .strip_suffix("/screen")?;
    (!sid.is_empty() && !sid.contains('/')).then_some(sid)
}

fn resource_error(e: ToolError) -> ErrorData {
    match e.code {
        "NOT_FOUND" => ErrorData::resource_not_found(e.message, None),
        "INVALID_ARGUMENT" => ErrorData::invalid_params(e.message, None),
        _ => ErrorData::invalid_request(format!("{}: {}", e.code, e.message), None),
    }
}

const INSTRUCTIONS: &str = "Terminals you can drive, each a PTY session a person can watch \
live in ptyhost's web UI. `run` runs a command in a session's shell and returns its output \
and exit code (a long one comes back as `running`: follow it with `task_status`). For \
programs that ask for input (REPLs, prompts, pagers) use `send_keys`, `wait_for` and \
`read_screen`. `read_output` with a `cursor` from any result returns only what is new.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Terminal {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("ptyhost", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self.who(&ctx).map_err(resource_error)?;
        let views = (self.terminals.sessions.list().await)
            .map_err(|e| resource_error(ToolError::internal(e)))?;
        let resources = views
            .into_iter()
            .filter(|v| v.live.is_some() && who.sees_session(&v.row.id))
            .map(|v| {
                let name = v.row.label.clone().unwrap_or_else(|| v.row.id.clone());
                Resource::new(screen_uri(&v.row.id), format!("{name} (screen)"))
                    .with_description("the session's visible screen, as text rows")
                    .with_mime_type("text/plain")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new("ptyhost://sessions/{session_id}/screen", "screen")
            .with_description("a session's visible screen, as text rows")
            .with_mime_type("text/plain");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.who(&ctx).map_err(resource_error)?;
        let sid = uri_session(&request.uri).ok_or_else(|| {
            ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
        })?;
        let screen = self.screen(&who, sid).await.map_err(resource_error)?;
        let text = ResourceContents::text(screen.lines.join("\n"), request.uri.clone())
            .with_mime_type("text/plain");
        Ok(ReadResourceResult::new(vec![text]).into())
    }

    /// A `subscriptions/listen` stream (2026-07-28) may name screens: each is watched while
    /// the stream lasts.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let screens = (requested.resource_subscriptions.iter().flatten())
            .filter(|uri| uri_session(uri).is_some())
            .cloned();
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(screens)
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let who = self
            .who(context.request_context())
            .map_err(resource_error)?;
        let stop = CancellationToken::new();
        let _stop_watchers = stop.clone().drop_guard();
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            let Some(handle) = uri_session(uri).and_then(|sid| self.terminals.live(&who, sid).ok())
            else {
                continue;
            };
            let (sink, uri) = (context.sink().clone(), uri.clone());
            tokio::spawn(screen::watch(handle, stop.clone(), move || {
                let (sink, uri) = (sink.clone(), uri.clone());
                async move { sink.notify_resource_updated(uri).await.is_ok() }
            }));
        }
        context.cancelled().await;
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self.who(&ctx).map_err(resource_error)?;
        let sid = uri_session(&request.uri).ok_or_else(|| {
            ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
        })?;
        let handle = self.terminals.live(&who, sid).map_err(resource_error)?;
        let stop = CancellationToken::new();
        if let Some(old) =
            (self.subscriptions.lock().unwrap()).insert(request.uri.clone(), stop.clone())
        {
            old.cancel();
        }
        let (peer, uri) = (ctx.peer.clone(), request.uri);
        tokio::spawn(screen::watch(handle, stop, move || {
            let (peer, uri) = (peer.clone(), uri.clone());
            async move {
                let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                peer.notify_resource_updated(params).await.is_ok()
            }
        }));
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(stop) = self.subscriptions.lock().unwrap().remove(&request.uri) {
            stop.cancel();
        }
        Ok(())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // The last clone of a connection's server ends its watchers.
        if Arc::strong_count(&self.subscriptions) == 1 {
            for stop in self.subscriptions.lock().unwrap().values() {
                stop.cancel();
            }
        }
    }
}
