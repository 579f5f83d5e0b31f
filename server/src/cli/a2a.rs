//! `ptyhost a2a …`: the A2A client on the command line. The task operations (send, get,
//! list, cancel, subscribe) run through one `Agent`, over the card's interfaces under the
//! version policy or over a STDIO agent; the card, status, watch and attach need HTTP.

use anyhow::Result;
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;
use wire::a2a::{
    Content, ListTasksRequest, ListTasksResponse, Message, Part, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task, TaskIdRequest, TaskState,
};

use crate::client::stdio::StdioAgent;
use crate::client::{self, Binding, ClientError, Events, Interface, Link, Policy, with_policy};
use crate::config::{A2aArgs, A2aOp};

pub async fn run(args: A2aArgs) -> Result<()> {
    super::init_tracing("warn");
    let json_out = args.json;
    if let Some(cmdline) = &args.stdio {
        let argv = shell_words::split(cmdline)?;
        let mut agent = StdioAgent::spawn(&argv).await?;
        let result = tasks(&mut Agent::Stdio(&mut agent), args.op, json_out).await;
        agent.close().await;
        return result;
    }
    let http = reqwest::Client::new();
    let url = match &args.op {
        A2aOp::Card { url }
        | A2aOp::Status { url }
        | A2aOp::Send { url, .. }
        | A2aOp::Get { url, .. }
        | A2aOp::List { url, .. }
        | A2aOp::Cancel { url, .. }
        | A2aOp::Subscribe { url, .. }
        | A2aOp::Attach { url, .. }
        | A2aOp::Watch { url, .. } => url.clone(),
    };
    let card = client::fetch_card(&http, args.card.as_deref().unwrap_or(&url)).await?;
    let all = client::interfaces(&card)?;
    let binding = match args
        .binding
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None => None,
        Some("HTTP+JSON" | "REST") => Some(Binding::HttpJson),
        Some("JSONRPC" | "JSON-RPC") => Some(Binding::JsonRpc),
        Some(other) => anyhow::bail!("--binding {other} is not HTTP+JSON or JSONRPC"),
    };
    let remote = Http {
        candidates: client::candidates(&all, args.protocol, binding),
        fallback: args.fallback && !args.no_fallback,
        policy: args.protocol,
        token: args.token.clone(),
        http,
    };
    match args.op {
        A2aOp::Card { .. } => print_card(&card, &remote.candidates, json_out),
        A2aOp::Status { .. } => status(&remote, json_out).await?,
        A2aOp::Watch {
            id,
            webhook,
            webhook_url,
            ..
        } => watch(&remote, &id, &webhook, webhook_url, json_out).await?,
        A2aOp::Attach {
            session, control, ..
        } => {
            let url = client::pty_ws_url(&card, &session).ok_or_else(|| {
                anyhow::anyhow!("the card lists no pty-ws interface to attach through")
            })?;
            client::attach::run(&url, remote.token.as_deref(), control).await?;
        }
        op => tasks(&mut Agent::Http(&remote), op, json_out).await?,
    }
    Ok(())
}

/// The task operations, over whichever transport `agent` speaks.
async fn tasks(agent: &mut Agent<'_>, op: A2aOp, json_out: bool) -> Result<()> {
    let print = |event: &StreamResponse| show(event, json_out);
    let context = |op: &'static str| move |e: ClientError| anyhow::anyhow!("{op}: {e}");
    let events = match op {
        A2aOp::Send {
            text,
            context: context_id,
            task,
            stream,
            return_immediately,
            ..
        } => {
            let message = user_message(&text, context_id, task);
            if stream {
                agent.send_stream(&message).await.map_err(context("send"))?
            } else {
                let sent = agent.send(&message, return_immediately).await;
                print(&sent.map_err(context("send"))?);
                return Ok(());
            }
        }
        A2aOp::Get { id, history, .. } => {
            let task = agent.get(&id, history).await.map_err(context("get"))?;
            print(&StreamResponse::Task(task));
            return Ok(());
        }
        A2aOp::List {
            context: context_id,
            ..
        } => {
            let page = agent.list(context_id).await.map_err(context("list"))?;
            for task in page.tasks {
                print(&StreamResponse::Task(task));
            }
            return Ok(());
        }
        A2aOp::Cancel { id, .. } => {
            let task = agent.cancel(&id).await.map_err(context("cancel"))?;
            print(&StreamResponse::Task(task));
            return Ok(());
        }
        A2aOp::Subscribe { id, .. } => agent.subscribe(&id).await.map_err(context("subscribe"))?,
        A2aOp::Card { .. } | A2aOp::Status { .. } | A2aOp::Attach { .. } | A2aOp::Watch { .. } => {
            anyhow::bail!(
                "a STDIO agent has no card and no terminal to attach: it speaks stdio-json with the 1.0 methods"
            )
        }
    };
    let mut events = events;
    while let Some(event) = events.next().await {
        print(&event.map_err(context("stream"))?);
    }
    Ok(())
}

/// An agent reached over HTTP: the card's interfaces in policy order.
struct Http {
    http: reqwest::Client,
    token: Option<String>,
    candidates: Vec<Interface>,
    policy: Policy,
    fallback: bool,
}

impl Http {
    /// `op` on the interface the policy selects (falling back only on VersionNotSupported).
    async fn call<T, F, Fut>(&self, op: F) -> Result<(Interface, T), ClientError>
    where
        F: Fn(Link) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let token = self.token.as_deref();
        with_policy(
            &self.http,
            token,
            &self.candidates,
            self.policy,
            self.fallback,
            op,
        )
        .await
    }

    /// `op`'s answer, on whichever interface answered it.
    async fn answer<T, F, Fut>(&self, op: F) -> Result<T, ClientError>
    where
        F: Fn(Link) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        self.call(op).await.map(|(_, answer)| answer)
    }
}

/// Where the task operations go; both answer in 1.0 shapes.
enum Agent<'a> {
    Http(&'a Http),
    Stdio(&'a mut StdioAgent),
}

impl Agent<'_> {
    async fn send(
        &mut self,
        message: &wire::a2a::Message,
        return_immediately: bool,
    ) -> Result<StreamResponse, ClientError> {
        match self {
            Agent::Http(h) => {
                h.answer(|c| async move { c.send(message, return_immediately).await })
                    .await
            }
            Agent::Stdio(a) => {
                let configuration = SendMessageConfiguration {
                    return_immediately,
                    ..SendMessageConfiguration::default()
                };
                a.call("SendMessage", send_request(message, Some(configuration)))
                    .await
            }
        }
    }

    async fn send_stream(&mut self, message: &wire::a2a::Message) -> Result<Events, ClientError> {
        match self {
            Agent::Http(h) => {
                h.answer(|c| async move { c.send_stream(message).await })
                    .await
            }
            Agent::Stdio(a) => {
                a.stream("SendStreamingMessage", send_request(message, None))
                    .await
            }
        }
    }

    async fn get(&mut self, id: &str, history: Option<u32>) -> Result<Task, ClientError> {
        match self {
            Agent::Http(h) => h.answer(|c| async move { c.get(id, history).await }).await,
            Agent::Stdio(a) => {
                let params = TaskIdRequest {
                    history_length: history,
                    ..TaskIdRequest::of(id)
                };
                a.call("GetTask", params).await
            }
        }
    }

    async fn list(&mut self, context: Option<String>) -> Result<ListTasksResponse, ClientError> {
        match self {
            Agent::Http(h) => {
                h.answer(|c| {
                    let context = context.clone();
                    async move { c.list(context.as_deref()).await }
                })
                .await
            }
            Agent::Stdio(a) => {
                let params = ListTasksRequest {
                    context_id: context,
                    ..ListTasksRequest::default()
                };
                a.call("ListTasks", params).await
            }
        }
    }

    async fn cancel(&mut self, id: &str) -> Result<Task, ClientError> {
        match self {
            Agent::Http(h) => h.answer(|c| async move { c.cancel(id).await }).await,
            Agent::Stdio(a) => a.call("CancelTask", TaskIdRequest::of(id)).await,
        }
    }

    async fn subscribe(&mut self, id: &str) -> Result<Events, ClientError> {
        match self {
            Agent::Http(h) => h.answer(|c| async move { c.subscribe(id).await }).await,
            Agent::Stdio(a) => a.stream("SubscribeToTask", TaskIdRequest::of(id)).await,
        }
    }
}

/// `card`: the agent's name and its interfaces in the order the policy tries them.
fn print_card(card: &Value, candidates: &[Interface], json_out: bool) {
    let order: Vec<TryEntry> = candidates
        .iter()
        .map(|i| TryEntry {
            version: i.version.label(),
            binding: i.binding.name(),
            url: &i.url,
        })
        .collect();
    if json_out {
        let view = CardView {
            card,
            try_order: &order,
        };
        println!("{}", serde_json::to_string(&view).unwrap_or_default());
        return;
    }
    println!(
        "{} — {}",
        card["name"].as_str().unwrap_or("?"),
        card["description"].as_str().unwrap_or("")
    );
    for i in &order {
        println!("  {} {} {}", i.version, i.binding, i.url);
    }
}

/// `status`: the interface the policy selects, proven by a probe any speaking interface
/// answers (TaskNotFound means it works).
async fn status(remote: &Http, json_out: bool) -> Result<()> {
    let probe = |c: Link| async move {
        match c.get("ptyhost-status-probe", None).await {
            Err(ClientError::A2a { reason, .. }) if reason == "TASK_NOT_FOUND" => Ok(()),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    };
    let (iface, ()) = remote
        .call(probe)
        .await
        .map_err(|e| anyhow::anyhow!("status: {e}"))?;
    let policy = match remote.policy {
        Policy::V03 => "0.3",
        Policy::V1 => "1.0",
        Policy::Auto => "auto",
    };
    let fallback = remote.fallback;
    if json_out {
        let status = StatusView {
            policy,
            fallback,
            selected_version: iface.version.label(),
            binding: iface.binding.name(),
            interface_url: &iface.url,
        };
        println!("{}", serde_json::to_string(&status).unwrap_or_default());
    } else {
        println!(
            "policy {policy} (fallback {}): A2A {} over {} at {}",
            if fallback { "on" } else { "off" },
            iface.version.label(),
            iface.binding.name(),
            iface.url
        );
    }
    Ok(())
}

/// `watch`: a push config with a local receiver and an SSE subscription at once, through
/// one reconciler, until the terminal state; then the config is removed.
async fn watch(
    remote: &Http,
    id: &str,
    webhook: &str,
    webhook_url: Option<String>,
    json_out: bool,
) -> Result<()> {
    use base64::Engine as _;
    use client::watch::{Reconciler, Seen};
    let failed = |e: ClientError| anyhow::anyhow!("watch: {e}");
    let listener = tokio::net::TcpListener::bind(webhook).await?;
    let hook = webhook_url.unwrap_or_else(|| {
        format!(
            "http://{}/hook",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        )
    });
    let secret =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let (iface, config_id) = remote
        .call(|c| {
            let (hook, secret) = (hook.clone(), secret.clone());
            async move { c.create_push(id, &hook, &secret).await }
        })
        .await
        .map_err(failed)?;
    let conn = Link {
        http: remote.http.clone(),
        token: remote.token.clone(),
        iface,
        headers: Default::default(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    client::watch::serve(listener, secret, config_id.clone(), tx.clone());
    match conn.subscribe(id).await {
        Ok(mut events) => {
            tokio::spawn(async move {
                while let Some(Ok(event)) = events.next().await {
                    let _ = tx.send(Seen {
                        delivery: None,
                        event: wire::to_json(&event),
                    });
                }
            });
        }
        // A finished task has no stream: its state is its last word.
        Err(_) => {
            let task = conn.get(id, None).await.map_err(failed)?;
            let _ = tx.send(Seen {
                delivery: None,
                event: wire::to_json(StreamResponse::Task(task)),
            });
        }
    }
    let mut reconciler = Reconciler::default();
    while let Some(seen) = rx.recv().await {
        if let Some(event) = reconciler.apply(seen) {
            match serde_json::from_value::<StreamResponse>(event.clone()) {
                Ok(event) => show(&event, json_out),
                Err(_) => println!("{event}"),
            }
        }
        if reconciler.finished() {
            break;
        }
    }
    if let Err(e) = conn.delete_push(id, &config_id).await {
        tracing::warn!(error = %e, "removing the push config failed");
    }
    Ok(())
}

/// The message of `ptyhost a2a send`: its words as one text part.
fn user_message(
    text: &[String],
    context: Option<String>,
    task: Option<String>,
) -> wire::a2a::Message {
    wire::a2a::Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: context,
        task_id: task,
        role: wire::a2a::Role::User,
        parts: vec![wire::a2a::Part::text(text.join(" "))],
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// An answer of `ptyhost a2a`: one JSON object per line with `--json`, else for people.
fn show(event: &StreamResponse, json_out: bool) {
    if json_out {
        println!("{}", serde_json::to_string(event).unwrap_or_default());
    } else {
        print_human(event);
    }
}

/// An event for people: task states, and output as it comes.
fn print_human(event: &StreamResponse) {
    use std::io::Write;
    let text = |p: &Part| match &p.content {
        Content::Text(t) => t.clone(),
        _ => String::new(),
    };
    let state = |s: TaskState| s.name().trim_start_matches("TASK_STATE_");
    let mut out = std::io::stdout().lock();
    match event {
        StreamResponse::Task(t) => {
            let _ = writeln!(out, "task {} {}", t.id, state(t.status.state));
            for a in t.artifacts.iter().flatten() {
                for p in &a.parts {
                    let _ = write!(out, "{}", text(p));
                }
            }
        }
        StreamResponse::StatusUpdate(u) => {
            let _ = writeln!(out, "[{}]", state(u.status.state));
        }
        StreamResponse::ArtifactUpdate(u) => {
            for p in &u.artifact.parts {
                let _ = write!(out, "{}", text(p));
            }
        }
        StreamResponse::Message(m) => {
            for p in &m.parts {
                let _ = writeln!(out, "{}", text(p));
            }
        }
    }
    let _ = out.flush();
}

/// A request to send `message`.
fn send_request(
    message: &Message,
    configuration: Option<SendMessageConfiguration>,
) -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message: message.clone(),
        configuration,
        metadata: None,
    }
}

/// One interface of `card --json`'s try order.
#[derive(Serialize)]
struct TryEntry<'a> {
    version: &'static str,
    binding: &'static str,
    url: &'a str,
}

/// `card --json`: the card and the order the policy tries its interfaces in.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CardView<'a> {
    card: &'a Value,
    try_order: &'a [TryEntry<'a>],
}

/// `status --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusView<'a> {
    policy: &'static str,
    fallback: bool,
    selected_version: &'static str,
    binding: &'static str,
    interface_url: &'a str,
}
