//! Tasks that ended lately, as they ended. A task in a terminal state never changes, so
//! GetTask answers it from here rather than from the store. Bounded by the bytes of the
//! tasks' JSON, the oldest going first; an entry is read from the store again after
//! `KEEP_FOR`, since the store may drop a closed session's history (its tasks with it).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wire::a2a::Task;

/// How long a task is answered from here before it is read from the store again.
const KEEP_FOR: Duration = Duration::from_secs(10);

/// The most JSON the kept tasks may add up to.
const MOST_BYTES: usize = 4 << 20;

#[derive(Default)]
pub(super) struct Finished {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    tasks: HashMap<String, Entry>,
    /// (task id, the entry's number), oldest first; an entry kept again has a new number.
    order: VecDeque<(String, u64)>,
    bytes: usize,
    numbered: u64,
}

struct Entry {
    task: Task,
    bytes: usize,
    at: Instant,
    number: u64,
}

impl Finished {
    /// Keeps `task`, which has ended; `bytes` is the size of its JSON.
    pub(super) fn keep(&self, task: &Task, bytes: usize) {
        debug_assert!(task.status.state.is_terminal());
        if bytes > MOST_BYTES / 16 {
            return;
        }
        let mut kept = self.kept.lock().unwrap();
        kept.numbered += 1;
        let entry = Entry {
            task: task.clone(),
            bytes,
            at: Instant::now(),
            number: kept.numbered,
        };
        kept.order.push_back((task.id.clone(), entry.number));
        kept.bytes += bytes;
        if let Some(old) = kept.tasks.insert(task.id.clone(), entry) {
            kept.bytes -= old.bytes;
        }
        while kept.bytes > MOST_BYTES {
            let Some((id, number)) = kept.order.pop_front() else {
                break;
            };
            if kept.tasks.get(&id).is_some_and(|e| e.number == number) {
                let gone = kept.tasks.remove(&id).map_or(0, |e| e.bytes);
                kept.bytes -= gone;
            }
        }
    }

    /// The task `id` as it ended, if it was kept less than `KEEP_FOR` ago.
    pub(super) fn get(&self, id: &str) -> Option<Task> {
        let mut kept = self.kept.lock().unwrap();
        match kept.tasks.get(id) {
            Some(e) if e.at.elapsed() < KEEP_FOR => Some(e.task.clone()),
            Some(_) => {
                let gone = kept.tasks.remove(id).map_or(0, |e| e.bytes);
                kept.bytes -= gone;
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::a2a::{TaskState, TaskStatus};

    fn ended(id: &str) -> Task {
        Task {
            id: id.into(),
            context_id: "ctx".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            artifacts: None,
            history: Vec::new(),
            metadata: None,
        }
    }

    #[test]
    fn the_oldest_tasks_go_first_once_the_bytes_are_spent() {
        let finished = Finished::default();
        let each = MOST_BYTES / 32;
        for i in 0..32 {
            finished.keep(&ended(&format!("t{i}")), each);
        }
        // Kept again, t0 is now the newest.
        finished.keep(&ended("t0"), each);
        finished.keep(&ended("t32"), each);
        assert!(finished.get("t0").is_some() && finished.get("t32").is_some());
        assert!(finished.get("t1").is_none(), "t1 was the oldest");
        assert!(finished.get("t2").is_some());
        assert_eq!(finished.kept.lock().unwrap().bytes, 32 * each);
    }

    #[test]
    fn a_task_too_large_for_its_share_is_not_kept() {
        let finished = Finished::default();
        finished.keep(&ended("big"), MOST_BYTES / 8);
        assert!(finished.get("big").is_none());
    }
}
