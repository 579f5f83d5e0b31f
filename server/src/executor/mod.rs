//! What the agent does with a message: `shell` types it into a session's shell,
//! `conformance` plays the A2A TCK scenarios. The task service (`a2a`) runs every message
//! through the one `--executor` chose; it knows no sessions, only what these report.

pub mod conformance;
pub mod shell;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Executor {
    Shell,
    Conformance,
}
