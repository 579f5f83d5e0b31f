//! Tasks of sessions another node runs: sent, streamed, subscribed to, read and canceled on
//! that node, so every binding of every node serves every task. A finished task, or one
//! whose node was lost, is read from the store here.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tokio::sync::broadcast;
use wire::a2a::{Message, SendMessageRequest, StreamResponse, Task};

use super::feed::{STREAM_BUFFER, TaskStream};
use super::{Sent, TaskService};
use crate::a2a::{A2aError, Via};
use crate::auth::Principal;

/// The cluster as the task service sees it (`cluster::Peers` is it).
#[async_trait::async_trait]
pub trait Cluster: Send + Sync {
    /// The node that runs context `context_id`, when another (live) node runs it.
    async fn node_of(&self, context_id: &str) -> anyhow::Result<Option<String>>;

    /// A2A 1.0 JSON-RPC `method` on `node` for `who`, with `extensions` activated; the
    /// result. Errors name `subject` (the task or context asked about).
    async fn call(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        extensions: &[&str],
        subject: &str,
    ) -> Result<Value, A2aError>;

    /// A streaming call: its events.
    async fn stream(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        extensions: &[&str],
        subject: &str,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2aError>>, A2aError>;
}

impl TaskService {
    /// The node that runs what `message` is about (its context, or the task it answers),
    /// when another node runs it.
    pub(super) async fn node_of_message(
        &self,
        message: &Message,
    ) -> Result<Option<String>, A2aError> {
        let context = match (&message.context_id, &message.task_id) {
            (Some(context), _) => Some(context.clone()),
            (None, Some(task)) if self.live_snapshot(task).is_none() => {
                self.current(task).await?.map(|t| t.context_id)
            }
            _ => None,
        };
        match context {
            Some(context) => Ok(self.inner.cluster.node_of(&context).await?),
            None => Ok(None),
        }
    }

    /// The node that runs task `task`, when it is unfinished and another node runs it.
    pub(super) async fn node_of_task(&self, task: &Task) -> Result<Option<String>, A2aError> {
        if task.status.state.is_terminal() || self.live_snapshot(&task.id).is_some() {
            return Ok(None);
        }
        Ok(self.inner.cluster.node_of(&task.context_id).await?)
    }

    pub(super) async fn send_remote(
        &self,
        node: &str,
        who: &Principal,
        req: &SendMessageRequest,
        via: Via<'_>,
    ) -> Result<Sent, A2aError> {
        let params = serde_json::to_value(req).map_err(anyhow::Error::from)?;
        let subject = subject(&req.message);
        let sent = (self.inner.cluster)
            .call(node, who, "SendMessage", params, via.extensions, subject)
            .await?;
        Ok(serde_json::from_value(sent).map_err(anyhow::Error::from)?)
    }

    pub(super) async fn stream_remote(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        via: Via<'_>,
        subject: &str,
    ) -> Result<TaskStream, A2aError> {
        let mut events = (self.inner.cluster)
            .stream(node, who, method, params, via.extensions, subject)
            .await?;
        let first = match events.next().await {
            Some(Ok(StreamResponse::Task(task))) => task,
            Some(Err(e)) => return Err(e),
            _ => return Err(A2aError::Internal),
        };
        // The node's events, relayed into a stream like a local task's.
        let (tx, rx) = broadcast::channel(STREAM_BUFFER);
        tokio::spawn(async move {
            let mut n = 0;
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        n += 1;
                        if tx.send((n, event)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "a forwarded task stream failed");
                        return;
                    }
                }
            }
        });
        Ok(TaskStream {
            first,
            first_after: 0,
            events: rx,
            lease: None,
            // The node ends the stream where its binding ends it.
            to_terminal: true,
        })
    }

    pub(super) async fn call_remote(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        id: &str,
    ) -> Result<Task, A2aError> {
        let task = (self.inner.cluster)
            .call(node, who, method, params, &[], id)
            .await?;
        Ok(serde_json::from_value(task).map_err(anyhow::Error::from)?)
    }
}

/// What errors about `message` name: its task, else its context.
fn subject(message: &Message) -> &str {
    (message.task_id.as_deref())
        .or(message.context_id.as_deref())
        .unwrap_or("")
}
