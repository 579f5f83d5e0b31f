//! The shell side of a session: the OSC 133 marks in its output, the commands queued for
//! it and the one running, INPUT_REQUIRED detection and cancel.

use tokio::sync::mpsc;
use tokio::time::Instant;
use wire::ErrorCode;

use super::{Actor, CANCEL_GRACE, INPUT_IDLE};
use crate::sessions::SessionRefusal;
use crate::sessions::marks::{Mark, MarkScanner, Piece};
use crate::sessions::pty::{InputError, Pty};

/// What a task's runner hears from the session.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// The command was typed at the prompt.
    Started,
    /// Bytes the command printed (between the C and D marks, exactly).
    Output(Vec<u8>),
    /// The shell reported the command's exit status.
    Finished(Option<i32>),
    /// The command waits for the terminal, showing this prompt.
    InputRequired(String),
    /// An answer was typed; the command goes on.
    Resumed(wire::a2a::Message),
    /// Canceled before it was typed.
    Dequeued,
    /// The session ended first.
    Ended,
}

/// What the shell's state machine does to its terminal: types into it, and kills its
/// foreground job. The session's PTY is one; the tests record what a machine does.
pub(super) trait Terminal {
    fn type_bytes(&self, bytes: Vec<u8>) -> Result<(), InputError>;
    fn kill_foreground_job(&self);
}

impl Terminal for Pty {
    fn type_bytes(&self, bytes: Vec<u8>) -> Result<(), InputError> {
        self.write(bytes)
    }

    fn kill_foreground_job(&self) {
        Pty::kill_foreground_job(self)
    }
}

/// A command line to run in the session's shell, and where its events go.
pub struct TaskRun {
    pub task_id: String,
    pub line: String,
    pub events: mpsc::UnboundedSender<TaskEvent>,
}

pub(super) struct Running {
    run: TaskRun,
    capturing: bool,
    kill_at: Option<Instant>,
    last_output: Instant,
    /// InputRequired was reported and not answered yet.
    asked: bool,
}

/// The shell side of a session: marks in its output, and the commands queued for it.
#[derive(Default)]
pub(super) struct ShellSide {
    pub(super) scanner: MarkScanner,
    pub(super) state: ShellState,
}

#[derive(Default)]
pub(super) struct ShellState {
    /// The prompt is on screen and nothing has been typed for a task since.
    prompt_ready: bool,
    /// A prompt has been printed: the shell's integration works.
    pub(super) prompted: bool,
    running: Option<Running>,
    queue: std::collections::VecDeque<TaskRun>,
}

impl ShellState {
    pub(super) fn on_piece(&mut self, piece: Piece<'_>, term: &impl Terminal) {
        match piece {
            Piece::Text(t) => {
                if let Some(r) = self.running.as_mut().filter(|r| r.capturing) {
                    r.last_output = Instant::now();
                    let _ = r.run.events.send(TaskEvent::Output(t.to_vec()));
                }
            }
            Piece::Mark(Mark::PromptEnd) => {
                self.prompt_ready = true;
                self.prompted = true;
                self.start_next(term);
            }
            Piece::Mark(Mark::PromptStart) => {}
            Piece::Mark(Mark::OutputStart) => {
                if let Some(r) = self.running.as_mut() {
                    r.capturing = true;
                }
            }
            // Typed only after a prompt, so any status that follows is our command's.
            Piece::Mark(Mark::Finished(code)) => {
                if let Some(r) = self.running.take() {
                    let _ = r.run.events.send(TaskEvent::Finished(code));
                }
            }
        }
    }

    /// Queues a command; it is typed at the next prompt, after those before it.
    pub(super) fn queue(&mut self, run: TaskRun, term: &impl Terminal) {
        self.queue.push_back(run);
        self.start_next(term);
    }

    pub(super) fn start_next(&mut self, term: &impl Terminal) {
        if !self.prompt_ready || self.running.is_some() {
            return;
        }
        let Some(run) = self.queue.pop_front() else {
            return;
        };
        let mut line = run.line.clone().into_bytes();
        line.push(b'\r');
        match term.type_bytes(line) {
            Ok(()) => {
                self.prompt_ready = false;
                let _ = run.events.send(TaskEvent::Started);
                self.running = Some(Running {
                    run,
                    capturing: false,
                    kill_at: None,
                    last_output: Instant::now(),
                    asked: false,
                });
            }
            Err(_) => {
                let _ = run.events.send(TaskEvent::Ended);
            }
        }
    }

    pub(super) fn cancel(&mut self, task_id: &str, term: &impl Terminal) {
        if let Some(i) = self.queue.iter().position(|r| r.task_id == task_id) {
            if let Some(run) = self.queue.remove(i) {
                let _ = run.events.send(TaskEvent::Dequeued);
            }
        } else if let Some(r) = self.running.as_mut().filter(|r| r.run.task_id == task_id) {
            let _ = term.type_bytes(vec![0x03]);
            r.kill_at.get_or_insert(Instant::now() + CANCEL_GRACE);
        }
    }

    /// A task runs or waits its turn.
    pub(super) fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// The command line of the task running now.
    pub(super) fn running_line(&self) -> Option<&str> {
        self.running.as_ref().map(|r| r.run.line.as_str())
    }

    /// A running command has been silent for the idle window and not yet reported.
    pub(super) fn may_wait_for_input(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.capturing && !r.asked && r.last_output.elapsed() >= INPUT_IDLE)
    }

    /// Reports the running command as waiting for input, with the visible prompt.
    pub(super) fn input_required(&mut self, prompt: String) {
        if let Some(r) = self.running.as_mut() {
            r.asked = true;
            let _ = r.run.events.send(TaskEvent::InputRequired(prompt));
        }
    }

    /// Types an answer for the running task; false when it is not the one waiting.
    pub(super) fn answer(
        &mut self,
        task_id: &str,
        message: wire::a2a::Message,
        term: &impl Terminal,
    ) -> bool {
        let Some(r) = self
            .running
            .as_mut()
            .filter(|r| r.run.task_id == task_id && r.asked)
        else {
            return false;
        };
        let mut line = message.text().into_bytes();
        line.push(b'\r');
        if term.type_bytes(line).is_err() {
            return false;
        }
        r.asked = false;
        r.last_output = Instant::now();
        let _ = r.run.events.send(TaskEvent::Resumed(message));
        true
    }

    pub(super) fn kill_at(&self) -> Option<Instant> {
        self.running.as_ref().and_then(|r| r.kill_at)
    }

    /// The grace period of a cancel ran out: kill the foreground job (never the shell).
    pub(super) fn kill_overdue(&mut self, term: &impl Terminal) {
        if let Some(r) = self
            .running
            .as_mut()
            .filter(|r| r.kill_at.is_some_and(|t| t <= Instant::now()))
        {
            r.kill_at = None;
            term.kill_foreground_job();
        }
    }

    /// The session ends with the shell's `exit` status: the running command ended it (as
    /// `exit 3` does), so that is its exit status too; the queued ones never ran.
    pub(super) fn end(&mut self, exit: Option<i32>) {
        if let Some(r) = self.running.take() {
            let event = exit.map_or(TaskEvent::Ended, |code| TaskEvent::Finished(Some(code)));
            let _ = r.run.events.send(event);
        }
        for run in self.queue.drain(..) {
            let _ = run.events.send(TaskEvent::Ended);
        }
    }
}

impl Actor {
    /// A silent command blocked reading the terminal needs input: report the prompt line.
    pub(super) fn check_input_required(&mut self) {
        if !self.pty.foreground_reads_terminal() {
            return;
        }
        let row = self.screen.cursor().position().map_or(0, |(_, row)| row);
        let prompt = self.screen.text().get(row).cloned().unwrap_or_default();
        if let Some(shell) = self.shell.as_mut() {
            shell.state.input_required(prompt);
        }
    }

    pub(super) fn run_task(&mut self, run: TaskRun) -> Result<(), SessionRefusal> {
        if self.close_reason.is_some() {
            return Err(SessionRefusal::new(
                ErrorCode::Internal,
                "the session is closing",
            ));
        }
        self.refuse_if_paused("a task")?;
        self.activity();
        let Some(shell) = self.shell.as_mut() else {
            return Err(SessionRefusal::new(
                ErrorCode::UnsupportedOperation,
                "this session runs a program without shell integration; tasks need a session started as a shell",
            ));
        };
        shell.state.queue(run, &self.pty);
        self.publish_status();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// A terminal that records what it is typed and how often its job is killed.
    #[derive(Default)]
    struct Recorder {
        typed: RefCell<Vec<Vec<u8>>>,
        kills: Cell<u32>,
    }

    impl Terminal for Recorder {
        fn type_bytes(&self, bytes: Vec<u8>) -> Result<(), InputError> {
            self.typed.borrow_mut().push(bytes);
            Ok(())
        }

        fn kill_foreground_job(&self) {
            self.kills.set(self.kills.get() + 1);
        }
    }

    fn run(id: &str, line: &str) -> (TaskRun, mpsc::UnboundedReceiver<TaskEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        let run = TaskRun {
            task_id: id.into(),
            line: line.into(),
            events,
        };
        (run, rx)
    }

    fn drained(rx: &mut mpsc::UnboundedReceiver<TaskEvent>) -> Vec<TaskEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn a_command_is_typed_at_the_prompt_and_its_output_is_what_lies_between_the_c_and_d_marks() {
        let term = Recorder::default();
        let mut shell = ShellState::default();
        let (first, mut first_rx) = run("t1", "echo hi");
        let (second, mut second_rx) = run("t2", "false");
        shell.queue(first, &term);
        shell.queue(second, &term);
        assert!(
            term.typed.borrow().is_empty(),
            "nothing is typed before a prompt"
        );
        shell.on_piece(Piece::Mark(Mark::PromptEnd), &term);
        shell.on_piece(Piece::Text(b"echo hi\r\n"), &term);
        shell.on_piece(Piece::Mark(Mark::OutputStart), &term);
        shell.on_piece(Piece::Text(b"hi\r\n"), &term);
        shell.on_piece(Piece::Mark(Mark::Finished(Some(0))), &term);
        assert_eq!(
            drained(&mut first_rx),
            [
                TaskEvent::Started,
                TaskEvent::Output(b"hi\r\n".to_vec()),
                TaskEvent::Finished(Some(0))
            ]
        );
        assert!(
            drained(&mut second_rx).is_empty(),
            "queued until the next prompt"
        );
        shell.on_piece(Piece::Mark(Mark::PromptStart), &term);
        shell.on_piece(Piece::Mark(Mark::PromptEnd), &term);
        assert_eq!(drained(&mut second_rx), [TaskEvent::Started]);
        assert_eq!(
            *term.typed.borrow(),
            [b"echo hi\r".to_vec(), b"false\r".to_vec()]
        );
    }

    #[test]
    fn cancel_takes_a_queued_command_out_and_interrupts_a_running_one_then_kills_its_job() {
        let term = Recorder::default();
        let mut shell = ShellState::default();
        let (running, mut running_rx) = run("t1", "sleep 100");
        let (queued, mut queued_rx) = run("t2", "echo later");
        shell.on_piece(Piece::Mark(Mark::PromptEnd), &term);
        shell.queue(running, &term);
        shell.queue(queued, &term);
        shell.cancel("t2", &term);
        assert_eq!(drained(&mut queued_rx), [TaskEvent::Dequeued]);
        shell.cancel("t1", &term);
        assert_eq!(
            term.typed.borrow().last(),
            Some(&vec![0x03]),
            "Ctrl-C first"
        );
        shell.kill_overdue(&term);
        assert_eq!(term.kills.get(), 0, "the grace period has not run out");
        shell.running.as_mut().unwrap().kill_at = Some(Instant::now());
        shell.kill_overdue(&term);
        assert_eq!(term.kills.get(), 1);
        shell.end(None);
        assert_eq!(
            drained(&mut running_rx),
            [TaskEvent::Started, TaskEvent::Ended]
        );
    }
}
