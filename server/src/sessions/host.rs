//! Session hosts. `native` runs the program on a PTY of ours (class `direct`): it ends with
//! ptyhost. `tmux` runs it in a tmux session on ptyhost's own tmux socket (class `managed`)
//! and attaches to it through a PTY of ours: the program outlives ptyhost, and the next
//! start re-adopts it with its history. Only hosts whose program is installed are offered.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::SessionSpec;

pub const NATIVE: &str = "native";
pub const TMUX: &str = "tmux";
pub const DIRECT: &str = "direct";
pub const MANAGED: &str = "managed";

/// Whether tmux runs here (asked once).
pub fn tmux_installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The backends offered, the default first.
pub fn backends() -> Vec<&'static str> {
    let mut b = vec![NATIVE];
    if tmux_installed() {
        b.push(TMUX);
    }
    b
}

/// The classes offered, the default first.
pub fn classes() -> Vec<&'static str> {
    let mut c = vec![DIRECT];
    if tmux_installed() {
        c.push(MANAGED);
    }
    c
}

#[derive(Debug, Clone, PartialEq)]
pub enum Host {
    Native,
    Tmux(Tmux),
}

impl Host {
    pub fn backend(&self) -> &'static str {
        match self {
            Host::Native => NATIVE,
            Host::Tmux(_) => TMUX,
        }
    }

    pub fn class(&self) -> &'static str {
        match self {
            Host::Native => DIRECT,
            Host::Tmux(_) => MANAGED,
        }
    }
}

/// tmux on ptyhost's own socket, so the user's tmux server is never touched.
#[derive(Debug, Clone, PartialEq)]
pub struct Tmux {
    pub socket: PathBuf,
}

impl Tmux {
    fn name(session_id: &str) -> String {
        format!("ptyhost-{session_id}")
    }

    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        cmd.stdin(std::process::Stdio::null());
        cmd
    }

    async fn run(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = self.command().args(args).output().await?;
        anyhow::ensure!(
            out.status.success(),
            "tmux {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// Starts the program in a detached tmux session of the spec's size, cwd and env.
    pub async fn create(&self, session_id: &str, spec: &SessionSpec) -> anyhow::Result<()> {
        let name = Tmux::name(session_id);
        let (cols, rows) = (spec.cols.to_string(), spec.rows.to_string());
        let mut args: Vec<String> = ["new-session", "-d", "-s", &name, "-x", &cols, "-y", &rows]
            .map(str::to_owned)
            .to_vec();
        if let Some(cwd) = &spec.cwd {
            args.extend(["-c".into(), cwd.display().to_string()]);
        }
        for (k, v) in &spec.env {
            args.extend(["-e".into(), format!("{k}={v}")]);
        }
        args.push("--".into());
        args.extend(spec.argv.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args).await?;
        // The screen is the program's alone: no status line, no delay after ESC.
        // (set-option takes a pane target, where the exact-match `=` does not parse.)
        self.run(&["set-option", "-t", &name, "status", "off"])
            .await?;
        self.run(&["set-option", "-s", "escape-time", "0"]).await
    }

    pub async fn exists(&self, session_id: &str) -> bool {
        let target = format!("={}", Tmux::name(session_id));
        self.run(&["has-session", "-t", &target]).await.is_ok()
    }

    /// The directory the session's program is in now.
    pub async fn current_path(&self, session_id: &str) -> Option<PathBuf> {
        let target = format!("={}", Tmux::name(session_id));
        let args = [
            "display-message",
            "-p",
            "-t",
            &target,
            "#{pane_current_path}",
        ];
        let out = self.command().args(args).output().await.ok()?;
        let path = String::from_utf8(out.stdout).ok()?;
        let path = path.trim_end_matches('\n');
        (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
    }

    /// Ends the program (its tmux session); the attached client then exits too.
    pub fn kill(&self, session_id: &str) {
        let target = format!("={}", Tmux::name(session_id));
        let mut cmd = std::process::Command::new("tmux");
        cmd.arg("-S")
            .arg(&self.socket)
            .args(["kill-session", "-t", &target]);
        if let Err(e) = cmd.output() {
            tracing::warn!(session_id, error = %e, "tmux kill-session failed");
        }
    }

    /// What our PTY runs: a tmux client attached to the session.
    pub fn attach_spec(&self, session_id: &str, cols: u16, rows: u16) -> SessionSpec {
        let argv = vec![
            "tmux".into(),
            "-S".into(),
            self.socket.display().to_string(),
            "attach-session".into(),
            "-t".into(),
            format!("={}", Tmux::name(session_id)),
        ];
        SessionSpec::plain(argv, cols, rows)
    }
}

/// The tmux socket of a data dir, when tmux is installed.
pub fn tmux_socket(data_dir: &Path) -> Option<PathBuf> {
    tmux_installed().then(|| data_dir.join("tmux.sock"))
}
