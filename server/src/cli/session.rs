//! `ptyhost session export SID [--out FILE]`: a session from the store, as an asciicast v2
//! recording, without a running server.

use anyhow::{Context, Result};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::config::{SessionCommand, SessionCommandArgs};

pub async fn run(args: SessionCommandArgs) -> Result<()> {
    let store = super::open_store(&args.store).await?;
    match args.command {
        SessionCommand::Export { session, out } => {
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
        }
    }
    store.close().await;
    Ok(())
}
