//! A running task's feed: its latest snapshot and its event stream, changed together, and
//! what a subscriber or the sender follows of it.

use super::*;
use crate::revocation::Lease;

/// Events a stream subscriber may fall behind by before its stream ends with an error.
pub(super) const STREAM_BUFFER: usize = 1024;

/// A running task's latest snapshot and its event stream, always changed together, so a
/// subscriber gets a snapshot and exactly the events after it.
pub(super) struct Feed {
    pub(super) gate: Mutex<()>,
    pub(super) snapshot: watch::Sender<Task>,
    pub(super) events: broadcast::Sender<StreamResponse>,
    pub(super) push: Push,
}

impl Feed {
    pub(super) fn publish(&self, task: &Task, event: StreamResponse) {
        let _gate = self.gate.lock().unwrap();
        self.push.notify(task, &event);
        self.snapshot.send_replace(task.clone());
        let _ = self.events.send(event);
    }

    /// Announces an artifact chunk of `task` (which already includes it).
    pub(super) fn publish_artifact(
        &self,
        task: &Task,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) {
        self.publish(
            task,
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append,
                last_chunk,
                metadata: None,
            }),
        );
    }

    pub(super) fn subscribe(&self) -> (Task, broadcast::Receiver<StreamResponse>) {
        let _gate = self.gate.lock().unwrap();
        (self.snapshot.borrow().clone(), self.events.subscribe())
    }
}

/// A started task's feed, and a subscription to it taken before its runner could announce
/// anything: a stream of a new task starts from its first state.
pub(super) struct Follow {
    pub(super) feed: Arc<Feed>,
    pub(super) first: Task,
    pub(super) events: broadcast::Receiver<StreamResponse>,
}

impl Follow {
    pub(super) fn of(feed: Arc<Feed>) -> Follow {
        let (first, events) = feed.subscribe();
        Follow {
            feed,
            first,
            events,
        }
    }
}

/// A task's stream: its snapshot first, then its events until it is terminal or interrupted.
pub struct TaskStream {
    pub first: Task,
    pub events: broadcast::Receiver<StreamResponse>,
    /// The token the stream was opened with: when it is revoked, the stream ends.
    pub lease: Option<Lease>,
}

impl TaskStream {
    /// The stream, ended with UNAUTHENTICATED when `lease`'s token stops being valid.
    pub fn cut_by(mut self, lease: Lease) -> TaskStream {
        self.lease = Some(lease);
        self
    }

    /// The stream as A2A sends it: the Task, then status and artifact updates, ending after
    /// the first terminal or interrupted state. A subscriber that fell behind gets an error,
    /// and so does one whose token was revoked.
    pub fn into_events(
        self,
    ) -> impl futures_util::Stream<Item = Result<StreamResponse, A2aError>> + Send {
        let ends = |state: TaskState| state.is_terminal() || state.is_interrupted();
        let start = (Some(self.first), self.events, self.lease, false);
        futures_util::stream::unfold(
            start,
            move |(first, mut events, mut lease, done)| async move {
                if done {
                    return None;
                }
                if let Some(task) = first {
                    let over = ends(task.status.state);
                    return Some((Ok(StreamResponse::Task(task)), (None, events, lease, over)));
                }
                let next = {
                    let cut = async {
                        match lease.as_mut() {
                            Some(lease) => lease.cut().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        next = events.recv() => Ok(next),
                        cut = cut => Err(cut),
                    }
                };
                let next = match next {
                    Ok(next) => next,
                    Err(cut) => {
                        let refusal = A2aError::Unauthenticated(cut.message().into());
                        return Some((Err(refusal), (None, events, lease, true)));
                    }
                };
                match next {
                    Ok(event) => {
                        let over = matches!(&event, StreamResponse::StatusUpdate(u) if ends(u.status.state));
                        Some((Ok(event), (None, events, lease, over)))
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => Some((
                        Err(A2aError::StreamLagged(missed)),
                        (None, events, lease, true),
                    )),
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            },
        )
    }
}
