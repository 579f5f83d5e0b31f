//! `ptyhost a202`: the A202 client (capability check, send, keygen, seal).

use anyhow::{Context, Result};

use crate::a202::seal::{Signer, seal};
use crate::client::a202::{self, Exchange, read_object};
use crate::config::{A202Args, A202Op};

/// 0 when the check (and submission) passed, 1 when refused, 2 on error.
pub async fn run(args: A202Args) -> u8 {
    super::init_tracing("warn");
    match command(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ptyhost a202: {e:#}");
            2
        }
    }
}

async fn command(args: A202Args) -> Result<u8> {
    let (url, file) = match args.op {
        A202Op::Check { url } => (url, None),
        A202Op::Send { url, file } => (url, Some(file)),
        A202Op::Keygen {
            key_id,
            algorithm,
            organization,
            agent,
            mandate,
            out,
        } => {
            let (signer, pkcs8) = Signer::generate(&key_id, algorithm.algorithm())?;
            let created_by = serde_json::to_value(Actor {
                organization_id: organization,
                agent_id: agent,
                mandate_id: mandate,
            })?;
            let record = signer.key_record(&created_by, &crate::clock::now_rfc3339());
            let key_path = out.join(format!("{key_id}.pk8"));
            write_private(&key_path, &pkcs8)?;
            let record_path = out.join(format!("{key_id}.key-record.json"));
            std::fs::write(&record_path, serde_json::to_vec_pretty(&record)?)?;
            println!("{}\n{}", key_path.display(), record_path.display());
            return Ok(0);
        }
        A202Op::Seal {
            file,
            key,
            key_id,
            algorithm,
            purpose,
        } => {
            let pkcs8 =
                std::fs::read(&key).with_context(|| format!("reading {}", key.display()))?;
            let signer = Signer::from_pkcs8(&key_id, algorithm.algorithm(), &pkcs8)?;
            let mut object = read_object(&file)?;
            let bytes = seal(
                &mut object,
                &[(&signer, &purpose)],
                &crate::clock::now_rfc3339(),
            )?;
            std::io::Write::write_all(&mut std::io::stdout(), &bytes)?;
            return Ok(0);
        }
    };
    let local = args.versions.local()?;
    a202::exchange(Exchange {
        url: &url,
        file: file.as_deref(),
        token: args.token.as_deref(),
        carrier: args.carrier,
        local: &local,
        json: args.json,
    })
    .await
}

/// Writes a private key readable by its owner only.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

/// Who creates an A202 object: `created_by`.
#[derive(serde::Serialize)]
struct Actor {
    organization_id: String,
    agent_id: String,
    mandate_id: String,
}
