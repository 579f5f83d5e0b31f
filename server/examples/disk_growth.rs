//! What a flood costs on disk: one session runs COMMAND for SECS seconds, once with the
//! store's caps turned off (the baseline, same run) and once with ptyhost's defaults; one
//! line each with the data directory's size (database and WAL).
//!
//!     cargo run --release -p server --example disk_growth -- [PTYHOST_BIN] [SECS] [COMMAND]
//!
//! COMMAND defaults to `base64 /dev/urandom` (output LZ4 cannot shrink); try `yes` too.

mod common;

use std::time::Duration;

const TOKEN: &str = "bench-admin-token";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let secs: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(60);
    let command = args.next().unwrap_or_else(|| "base64 /dev/urandom".into());
    let uncapped = ["--replay-max-bytes", "1TiB", "--max-store-bytes", "1TiB"];
    for (name, flags) in [("uncapped", &uncapped[..]), ("default caps", &[][..])] {
        let dir = tempfile::tempdir()?;
        let (mut child, addr) = common::start_server(&bin, dir.path(), TOKEN, flags).await?;
        common::command_session(&reqwest::Client::new(), &addr, TOKEN, &command).await?;
        tokio::time::sleep(Duration::from_secs(secs)).await;
        child.kill().await?;
        let bytes: u64 = std::fs::read_dir(dir.path().join("data"))?
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum();
        let mib = bytes as f64 / (1024.0 * 1024.0);
        println!(
            "{command:?} for {secs} s, {name}: {mib:.0} MiB on disk ({:.0} MiB a minute)",
            mib * 60.0 / secs as f64
        );
    }
    Ok(())
}
