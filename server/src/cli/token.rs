//! `ptyhost token create|list|revoke`: tokens in the store, without a running server.

use std::io::Write;

use anyhow::Result;

use crate::auth::{self, TokenRequest};
use crate::clock;
use crate::config::{TokenArgs, TokenCommand};

pub async fn run(args: TokenArgs) -> Result<()> {
    let store = super::open_store(&args.store).await?;
    let mut out = std::io::stdout().lock();
    match args.command {
        TokenCommand::Create {
            scope,
            session,
            ttl,
            label,
        } => {
            if let Some(sid) = &session {
                anyhow::ensure!(
                    store.sessions().get(sid).await?.is_some(),
                    "no session {sid}"
                );
            }
            let issued = auth::issue(
                &store,
                TokenRequest {
                    scope,
                    session_id: session.as_deref(),
                    label: label.as_deref(),
                    ttl,
                    kind: "cli",
                    secret: None,
                },
            )
            .await?;
            writeln!(out, "{}", issued.secret)?;
            eprintln!("token id {}", issued.id);
        }
        TokenCommand::List => {
            writeln!(out, "ID\tSCOPE\tSESSION\tKIND\tLABEL\tEXPIRES\tREVOKED")?;
            for t in store.tokens().list(None).await? {
                let when = |v: Option<i64>| v.map(clock::rfc3339).unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    t.id,
                    t.scope,
                    t.session_id.as_deref().unwrap_or("-"),
                    t.kind,
                    t.label.as_deref().unwrap_or("-"),
                    when(t.expires_at),
                    when(t.revoked_at),
                )?;
            }
        }
        TokenCommand::Revoke { id } => {
            anyhow::ensure!(
                store.tokens().revoke(&id, None, clock::now_ms()).await?,
                "no live token {id}"
            );
            writeln!(out, "revoked {id}")?;
        }
    }
    store.close().await;
    Ok(())
}
