//! Task updates in the session's stream: each event of a task running in the session is
//! numbered once from the session's counter and retained, so it replays after a reconnect;
//! every connection that follows the task gets it under that sequence and id, carrying its
//! own service parameters. A joined follower gets it in order with its other frames.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use serde_json::{Map, Value};
use wire::server::{ServerFrame, ServerOp, TaskUpdate as UpdatePayload};

use super::Actor;
use crate::clock;
use crate::sessions::Outbound;
use crate::sessions::{TASK_UPDATE, TaskUpdate};
use crate::store::{Frame, FrameBody};

/// Task events remembered for followers that have not asked for them yet.
const REMEMBERED: usize = 4096;

/// A task event: its task and its place in the task's stream.
type Key = (String, (u64, bool));

/// The sequence, envelope id and time each recent task event was numbered with.
#[derive(Default)]
pub(super) struct Numbered {
    order: VecDeque<Key>,
    by_place: HashMap<Key, (u64, String, i64)>,
}

impl Actor {
    pub(super) fn task_update(&mut self, u: TaskUpdate) {
        let key = (u.task_id, u.place);
        let (seq, id, at) = match self.numbered.by_place.get(&key) {
            Some(n) => n.clone(),
            None => {
                let seq = self.next_seq();
                let (id, at) = (uuid::Uuid::now_v7().to_string(), clock::now_ms());
                let text = update_envelope(seq, &id, at, &u.payload, None);
                self.retain(Frame {
                    sequence: seq,
                    created_at: at,
                    body: FrameBody::Envelope {
                        kind: TASK_UPDATE.into(),
                        text,
                    },
                });
                let numbered = &mut self.numbered;
                if numbered.order.len() == REMEMBERED
                    && let Some(old) = numbered.order.pop_front()
                {
                    numbered.by_place.remove(&old);
                }
                numbered.order.push_back(key.clone());
                numbered.by_place.insert(key, (seq, id.clone(), at));
                (seq, id, at)
            }
        };
        if seq <= u.sent_upto {
            let _ = u.reply.send(None);
            return;
        }
        let json = update_envelope(seq, &id, at, &u.payload, u.service_parameters.as_ref());
        match u.member.as_deref().and_then(|m| self.index(m)) {
            Some(i) => {
                self.deliver(i, Outbound::Frame(json));
                let _ = u.reply.send(None);
            }
            None => {
                let _ = u.reply.send(Some(json));
            }
        }
    }
}

/// A `TaskStatusUpdate` envelope.
fn update_envelope(
    seq: u64,
    id: &str,
    at: i64,
    payload: &UpdatePayload,
    service_parameters: Option<&Map<String, Value>>,
) -> Bytes {
    let frame = ServerFrame {
        id: id.to_owned(),
        ts: clock::rfc3339(at),
        sequence: Some(seq),
        service_parameters: service_parameters.cloned(),
        op: ServerOp::TaskUpdate(Box::new(payload.clone())),
    };
    Bytes::from(frame.to_text())
}
