//! `ptyhost session export SID [--out FILE]`: a session from the store, as an asciicast v2
//! recording, without a running server. Over a running server: `session net` and `session
//! ports` (a running session's network), and `pause`, `resume`, `snapshot`, `fork` and
//! `restore` (its lifecycle).

use anyhow::{Context, Result};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use serde_json::json;
use wire::control;

use crate::config::{ServerArgs, SessionCommand, SessionCommandArgs, StoreArgs};

pub async fn run(args: SessionCommandArgs) -> Result<()> {
    match args.command {
        SessionCommand::Net {
            session,
            allow,
            server,
        } => {
            let network = match allow.is_empty() {
                true => control::Network::Mode("none".into()),
                false => control::Network::Allow { allow },
            };
            let update = control::UpdateSession {
                sandbox: control::SandboxUpdate { network },
            };
            let url = session_url(&server, &session)?;
            let resp = call(&server, reqwest::Client::new().patch(url).json(&update)).await?;
            let shown: control::Session = resp.json().await?;
            if let Some(sandbox) = shown.sandbox {
                println!("{}", serde_json::to_string(&sandbox.network)?);
            }
        }
        SessionCommand::Ports { session, server } => {
            let url = session_url(&server, &session)?;
            let resp = call(&server, reqwest::Client::new().get(url.clone())).await?;
            let shown: control::Session = resp.json().await?;
            // The port, its API URL (for a bearer), and its own origin (for a browser).
            for p in shown.ports.unwrap_or_default() {
                let origin = p.url.map(|u| format!("\t{u}")).unwrap_or_default();
                println!("{}\t{url}/ports/{}/{origin}", p.port, p.port);
            }
        }
        SessionCommand::Pause { session, server } => {
            let shown = lifecycle(&server, &session, "pause", json!({})).await?;
            let shown: control::Session = serde_json::from_value(shown)?;
            println!("{}", shown.state);
        }
        SessionCommand::Resume { session, server } => {
            let shown = lifecycle(&server, &session, "resume", json!({})).await?;
            let shown: control::Session = serde_json::from_value(shown)?;
            println!("{}", shown.state);
        }
        SessionCommand::Snapshot {
            session,
            label,
            server,
        } => {
            let body = json!(control::TakeSnapshot { label });
            let taken = lifecycle(&server, &session, "snapshot", body).await?;
            let taken: control::Snapshot = serde_json::from_value(taken)?;
            println!(
                "{}\t{} bytes\t{} files",
                taken.snapshot_id, taken.bytes, taken.files
            );
        }
        SessionCommand::Fork {
            session,
            count,
            server,
        } => {
            let body = json!(control::Fork { count: Some(count) });
            let forked = lifecycle(&server, &session, "fork", body).await?;
            let forked: control::Forked = serde_json::from_value(forked)?;
            for s in forked.sessions {
                println!("{}", s.session_id);
            }
        }
        SessionCommand::Restore { snapshot, server } => {
            let url = format!("{}/sessions", server.url.trim_end_matches('/'));
            let body = control::CreateSession {
                from_snapshot: Some(snapshot),
                ..Default::default()
            };
            let resp = call(&server, reqwest::Client::new().post(url).json(&body)).await?;
            let shown: control::Session = resp.json().await?;
            println!("{}", shown.session_id);
        }
        SessionCommand::Export { session, out } => export(&args.store, session, out).await?,
    }
    Ok(())
}

/// `POST B/sessions/{session}:{op}` with `body`; the answer.
async fn lifecycle(
    server: &ServerArgs,
    session: &str,
    op: &str,
    body: serde_json::Value,
) -> Result<serde_json::Value> {
    let url = format!("{}:{op}", session_url(server, session)?);
    let resp = call(server, reqwest::Client::new().post(url).json(&body)).await?;
    Ok(resp.json().await?)
}

/// `B/sessions/{session}` under the server's base.
fn session_url(server: &ServerArgs, session: &str) -> Result<reqwest::Url> {
    let url = format!("{}/sessions/{session}", server.url.trim_end_matches('/'));
    reqwest::Url::parse(&url).with_context(|| format!("bad --url {}", server.url))
}

async fn call(server: &ServerArgs, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
    let req = match &server.token {
        Some(t) => req.bearer_auth(t),
        None => req,
    };
    let resp = req.send().await?;
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status().as_u16();
    let refusal: control::ErrorBody = resp.json().await?;
    anyhow::bail!("{status} {}: {}", refusal.error.code, refusal.error.message)
}

async fn export(store: &StoreArgs, session: String, out: Option<std::path::PathBuf>) -> Result<()> {
    let store = super::open_store(store).await?;
    let row = store
        .sessions()
        .get(&session)
        .await?
        .with_context(|| format!("no session {session}"))?;
    let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin> = match &out {
        Some(file) => Box::new(
            tokio::fs::File::create(file)
                .await
                .with_context(|| format!("creating {}", file.display()))?,
        ),
        None => Box::new(tokio::io::stdout()),
    };
    let mut cast = std::pin::pin!(crate::recording::cast(store.clone(), row));
    while let Some(chunk) = cast.next().await {
        sink.write_all(&chunk?).await?;
    }
    sink.flush().await?;
    store.close().await;
    Ok(())
}
