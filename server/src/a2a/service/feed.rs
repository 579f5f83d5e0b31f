//! A running task's feed: its latest snapshot and its event stream, changed together, and
//! what a subscriber or the sender follows of it.

use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};
use wire::a2a::{Artifact, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState};

use crate::a2a::A2aError;
use crate::a2a::push::Push;
use crate::revocation::Lease;

/// Events a stream subscriber may fall behind by before its stream ends with an error.
pub(super) const STREAM_BUFFER: usize = 1024;

/// A running task's latest snapshot and its event stream, always changed together, so a
/// subscriber gets a snapshot and exactly the events after it.
pub(super) struct Feed {
    /// How many events were published: each event's place in the task's stream, the same
    /// for every subscriber (a binding that numbers events numbers each once by it).
    pub(super) gate: Mutex<u64>,
    pub(super) snapshot: watch::Sender<Task>,
    pub(super) events: broadcast::Sender<(u64, StreamResponse)>,
    pub(super) push: Push,
}

impl Feed {
    pub(super) fn publish(&self, task: &Task, event: StreamResponse) {
        let mut published = self.gate.lock().unwrap();
        *published += 1;
        self.push.notify(task, &event);
        self.snapshot.send_replace(task.clone());
        let _ = self.events.send((*published, event));
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

    /// The task now, after how many events, and a receiver of the events after it.
    pub(super) fn subscribe(&self) -> (Task, u64, broadcast::Receiver<(u64, StreamResponse)>) {
        let published = self.gate.lock().unwrap();
        (
            self.snapshot.borrow().clone(),
            *published,
            self.events.subscribe(),
        )
    }
}

/// A started task's feed, and a subscription to it taken before its runner could announce
/// anything: a stream of a new task starts from its first state.
pub(super) struct Follow {
    pub(super) feed: Arc<Feed>,
    pub(super) stream: TaskStream,
}

impl Follow {
    pub(super) fn of(feed: Arc<Feed>) -> Follow {
        let stream = TaskStream::of(&feed);
        Follow { feed, stream }
    }
}

/// Where an event stands in its task's stream: the task as a subscriber first saw it after
/// `n` events (`snapshot`), or the `n`th event. Every subscriber's events have the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place {
    pub n: u64,
    pub snapshot: bool,
}

/// A task's stream: its snapshot first, then its events until it is terminal or (unless it
/// is a subscription) interrupted.
pub struct TaskStream {
    pub first: Task,
    /// How many events the task had published when `first` was taken.
    pub first_after: u64,
    pub events: broadcast::Receiver<(u64, StreamResponse)>,
    /// The token the stream was opened with: when it is revoked, the stream ends.
    pub lease: Option<Lease>,
    /// A subscription (SubscribeToTask) stays open through INPUT_REQUIRED and AUTH_REQUIRED
    /// until the task is terminal; a message's stream ends at either.
    pub to_terminal: bool,
}

impl TaskStream {
    pub(super) fn of(feed: &Feed) -> TaskStream {
        let (first, first_after, events) = feed.subscribe();
        TaskStream {
            first,
            first_after,
            events,
            lease: None,
            to_terminal: false,
        }
    }

    /// The stream of a subscription: it ends only when the task is terminal.
    pub fn to_terminal(mut self) -> TaskStream {
        self.to_terminal = true;
        self
    }

    /// The stream, ended with UNAUTHENTICATED when `lease`'s token stops being valid.
    pub fn cut_by(mut self, lease: Lease) -> TaskStream {
        self.lease = Some(lease);
        self
    }

    /// The stream as A2A sends it: the Task, then status and artifact updates, ending after
    /// the first terminal state (or interrupted one, unless `to_terminal`). A subscriber
    /// that fell behind gets an error, and so does one whose token was revoked.
    pub fn into_events(
        self,
    ) -> impl futures_util::Stream<Item = Result<StreamResponse, A2aError>> + Send {
        use futures_util::StreamExt;
        self.into_placed_events().map(|(_, event)| event)
    }

    /// `into_events`, each event with its place in the task's stream.
    pub fn into_placed_events(
        self,
    ) -> impl futures_util::Stream<Item = (Place, Result<StreamResponse, A2aError>)> + Send {
        let place = |n, snapshot| Place { n, snapshot };
        let ends = match self.to_terminal {
            true => TaskState::is_terminal,
            false => TaskState::ends_stream,
        };
        let first = Some((self.first, self.first_after));
        let start = (first, self.events, self.lease, false, self.first_after);
        futures_util::stream::unfold(
            start,
            move |(first, mut events, mut lease, done, last)| async move {
                if done {
                    return None;
                }
                if let Some((task, after)) = first {
                    let over = ends(task.status.state);
                    let first = (place(after, true), Ok(StreamResponse::Task(task)));
                    return Some((first, (None, events, lease, over, after)));
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
                        let cut = (place(last, false), Err(refusal));
                        return Some((cut, (None, events, lease, true, last)));
                    }
                };
                match next {
                    Ok((n, event)) => {
                        let over = matches!(&event, StreamResponse::StatusUpdate(u) if ends(u.status.state));
                        Some(((place(n, false), Ok(event)), (None, events, lease, over, n)))
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => Some((
                        (place(last, false), Err(A2aError::StreamLagged(missed))),
                        (None, events, lease, true, last),
                    )),
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            },
        )
    }
}
