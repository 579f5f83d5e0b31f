//! A202 objects a message carries: appended to their streams, and a receipt task for a
//! message that carries nothing else.

use serde_json::{Map, Value};
use tokio::sync::watch;
use wire::a2a::{Artifact, Content, Part, Task, TaskState};

use super::{NewTask, Started, TaskService, bind, stamped, status};
use crate::a2a::A2aError;
use crate::a202;
use crate::a202::{Carrier, Receipt};
use crate::agentic::Stamp;

/// A task's metadata for the A202 objects its message carried.
pub(super) fn receipt_metadata(receipts: &[Receipt]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(a202::URI.into(), receipts_value(receipts));
    m
}

/// `{"receipts": [...]}`: where a task carries its A202 receipts.
fn receipts_value(receipts: &[Receipt]) -> Value {
    #[derive(serde::Serialize)]
    struct Receipts<'a> {
        receipts: &'a [Receipt],
    }
    wire::to_json(Receipts { receipts })
}

impl TaskService {
    /// Appends a message's A202 objects (the carrier is A2A) and returns their receipts.
    pub(super) async fn receive(
        &self,
        objects: Vec<a202::object::Verified>,
    ) -> Result<Vec<Receipt>, A2aError> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.inner.a202.append(objects, Carrier::A2a).await?)
    }

    /// A message that only carries A202 objects: they are appended and the task that
    /// carried them completes with their receipts as its artifact.
    pub(super) async fn start_receipt(
        &self,
        new: NewTask,
        objects: Vec<a202::object::Verified>,
        stamp: Stamp,
    ) -> Result<Started, A2aError> {
        let NewTask {
            mut message,
            task_id,
            push,
        } = new;
        let receipts = self.receive(objects).await?;
        let context_id = bind(&mut message, &task_id);
        let part = Part {
            content: Content::Data(receipts_value(&receipts)),
            media_type: Some("application/json".into()),
            filename: None,
            metadata: None,
        };
        let mut task = Task {
            id: task_id,
            context_id,
            status: status(
                TaskState::Completed,
                Some(format!("received {} A202 object(s)", receipts.len())),
                None,
            ),
            artifacts: Some(vec![Artifact {
                artifact_id: "a202-receipt".into(),
                name: Some("A202 receipt".into()),
                description: Some("Where each A202 object the message carried now stands in its transaction stream.".into()),
                parts: vec![part],
                metadata: None,
            }]),
            history: vec![message],
            metadata: Some(stamped(receipt_metadata(&receipts), &stamp)),
        };
        stamp.status(&mut task.status);
        let service = self.clone();
        let id = task.id.clone();
        let follow = self
            .launch(&task, push, watch::channel(false).0, move |_| async move {
                service.inner.live.lock().unwrap().remove(&id);
            })
            .await?;
        Ok(Started::Feed(Box::new(follow)))
    }
}
