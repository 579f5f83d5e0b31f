//! The store's semantics, the same on both backends: every test runs on an embedded SQLite
//! file and on a new PostgreSQL database (`PTYHOST_TEST_POSTGRES_URL`).

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use server::store::*;

mod sessions_and_frames;
mod tasks_and_records;

/// A store on each backend (the SQLite one in `dir`).
async fn stores(dir: &tempfile::TempDir) -> Vec<Store> {
    let mut all = vec![Store::open(None, dir.path()).await.unwrap()];
    if let Some(url) = common::postgres_database().await {
        all.push(Store::open(Some(&url), dir.path()).await.unwrap());
    }
    all
}

fn session(id: &str, node: &str, state: &str) -> SessionRow {
    SessionRow {
        id: id.into(),
        instance_id: "local".into(),
        node_id: node.into(),
        label: Some("a label".into()),
        argv: vec!["/bin/sh".into(), "-lc".into(), "cat".into()],
        cwd: Some("/tmp".into()),
        env: BTreeMap::from([("K".into(), "v".into())]),
        backend: "native".into(),
        class: "direct".into(),
        cols: 80,
        rows: 24,
        state: state.into(),
        exit_code: None,
        close_reason: None,
        last_sequence: 0,
        replay_floor: 0,
        sequence_reserved: 64,
        created_at: 1_700_000_000_000,
        closed_at: None,
        workspace: None,
        sandbox: None,
        lifetime: None,
    }
}

/// Adds a running session `id` of node "n".
async fn running_session(store: &Store, id: &str) {
    store
        .sessions()
        .insert(&session(id, "n", "running"))
        .await
        .unwrap();
}

fn output(sequence: u64, at: i64, data: &[u8]) -> Frame {
    Frame {
        sequence,
        created_at: at,
        body: FrameBody::Output {
            envelope_id: format!("id-{sequence}"),
            data: Bytes::copy_from_slice(data),
        },
    }
}

fn envelope(sequence: u64, at: i64, kind: &str) -> Frame {
    Frame {
        sequence,
        created_at: at,
        body: FrameBody::Envelope {
            kind: kind.into(),
            text: Bytes::from(format!(r#"{{"kind":"{kind}","sequence":{sequence}}}"#)),
        },
    }
}

/// Runs `test` on a store of each backend, with the backend's name for its messages.
async fn on_both_backends(test: impl AsyncFn(Store, &str)) {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(&dir).await {
        let name = format!("{:?}", store.backend());
        test(store, &name).await;
    }
}
