//! What the benchmarks share: starting ptyhost, reading a process's resident memory.

/// Resident memory of the process, in MiB (0 when it cannot be read).
pub fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Starts `ptyhost serve` on a free loopback port with a store in `dir`, admin token
/// `token` and `flags`; the child and the address it listens on.
pub async fn start_server(
    bin: &std::path::Path,
    dir: &std::path::Path,
    token: &str,
    flags: &[&str],
) -> anyhow::Result<(tokio::process::Child, String)> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(bin)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--bootstrap-token",
            token,
        ])
        .args(flags)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("HOME", dir)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await? {
        if let Some(addr) = line.strip_prefix("listening on http://") {
            return Ok((child, addr.to_owned()));
        }
    }
    anyhow::bail!("ptyhost did not start")
}
