//! A write the store refuses is never silent: while another process holds the database's
//! write lock, `/readyz` turns red. A short refusal costs nothing: once the lock goes every
//! frame a viewer saw is in the store as it saw it. A long one does not stop the terminal:
//! live output goes on with bounded memory, and replay then reports the range the store
//! never took instead of handing out a gap.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};

const LINES: usize = 300;
/// Lines of `yes flood` (6 bytes each, 150 MB) printed while the store is down: far more
/// than may wait for it (16 MiB), and than the server may grow by (120 MiB: that, the ring and
/// the viewer's queue).
const FLOOD_LINES: usize = 25_000_000;

async fn readyz(s: &TestServer) -> u16 {
    let r = s.http.get(format!("http://{}/readyz", s.addr)).send().await;
    r.map_or(0, |r| r.status().as_u16())
}

async fn until_ready_is(s: &TestServer, status: u16) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while readyz(s).await != status {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("/readyz never answered {status}"));
}

/// Output frames up to the session's `Closed`: sequence -> bytes.
async fn outputs_until_closed(c: &mut Client) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    loop {
        let f = c
            .try_next(Duration::from_secs(30))
            .await
            .expect("frames until Closed");
        match kind(&f) {
            "Output" => {
                out.insert(seq(&f), output_bytes(&f));
            }
            "Closed" => return out,
            _ => {}
        }
    }
}

/// Another process's connection to the server's database, holding its write lock.
async fn lock_store(s: &TestServer) -> SqliteConnection {
    let options = SqliteConnectOptions::new().filename(s.dir.join("ptyhost.db"));
    let mut locker = SqliteConnection::connect_with(&options).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    locker
}

async fn unlock_store(mut locker: SqliteConnection) {
    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
}

#[tokio::test]
async fn a_store_that_refuses_writes_turns_readyz_red_and_leaves_no_silent_replay_gap() {
    let s = TestServer::start(&[]).await;
    let sid = s
        .command_session(&format!(
            "sleep 0.5; for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.01; done"
        ))
        .await;
    let mut viewer = s.attach(&sid, ADMIN).await;
    viewer.join("observer").await;
    let live = tokio::spawn(async move { outputs_until_closed(&mut viewer).await });

    // Another process takes the write lock and holds it past the server's busy timeout.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let locker = lock_store(&s).await;
    until_ready_is(&s, 503).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    unlock_store(locker).await;
    until_ready_is(&s, 200).await;

    let live = live.await.unwrap();
    s.wait_closed(&sid).await;
    let frames = s.replay_closed(&sid, 0).await;
    let stored: BTreeMap<u64, Vec<u8>> = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| (seq(f), output_bytes(f)))
        .collect();
    for (n, bytes) in &live {
        assert_eq!(stored.get(n), Some(bytes), "frame {n} the viewer saw");
    }
    let text = String::from_utf8_lossy(&stored.values().flatten().copied().collect::<Vec<u8>>())
        .into_owned();
    let lines: Vec<usize> = text
        .split("line-")
        .skip(1)
        .filter_map(|l| l.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    assert_eq!(
        lines,
        (1..=LINES).collect::<Vec<_>>(),
        "every line, once, in order"
    );
}

/// Reads until "flood-over" shows, in output or in a keyframe (a viewer that fell behind is
/// resynced with one); returns the Output frames read, sequence -> bytes.
async fn outputs_until_flood_over(c: &mut Client) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut tail = Vec::new();
    loop {
        let f = c.try_next(Duration::from_secs(60)).await.expect("frames");
        match kind(&f) {
            "Output" => {
                let bytes = output_bytes(&f);
                tail.extend_from_slice(&bytes);
                out.insert(seq(&f), bytes);
            }
            "Keyframe" => tail.extend_from_slice(&snapshot(&f)),
            _ => continue,
        }
        if String::from_utf8_lossy(&tail).contains("flood-over\r\n") {
            return out;
        }
        tail.drain(..tail.len().saturating_sub(64));
    }
}

#[tokio::test]
async fn a_store_that_stays_down_keeps_live_output_flowing_with_bounded_memory_and_replay_reports_the_lost_range()
 {
    let s = TestServer::start(&[]).await;
    let sid = s.create_session(serde_json::json!({})).await.session_id;
    let mut controller = s.attach(&sid, ADMIN).await;
    controller.join("controller").await;
    controller.input("echo ready\n").await;
    controller.output_until("ready\r\n").await;
    let before = s.rss_mib();

    let locker = lock_store(&s).await;
    controller.input("echo store-down\n").await;
    until_ready_is(&s, 503).await;
    let at_refusal = s.session(&sid).await.current_sequence;
    controller
        .input(&format!(
            "yes flood | head -n {FLOOD_LINES}; echo flood\"\"-over\n"
        ))
        .await;
    let mut peak = before;
    let live = tokio::select! {
        live = outputs_until_flood_over(&mut controller) => live,
        _ = async {
            loop {
                peak = peak.max(s.rss_mib());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        } => unreachable!(),
    };
    assert_eq!(readyz(&s).await, 503, "the store still refuses writes");
    let during = s.session(&sid).await.current_sequence;
    assert!(
        live.keys().any(|&n| n > at_refusal) && during > at_refusal,
        "live output went on while the store refused writes"
    );
    assert!(
        peak - before < 120.0,
        "{FLOOD_LINES} lines while the store is down grew the server from {before:.0} to {peak:.0} MiB"
    );

    unlock_store(locker).await;
    until_ready_is(&s, 200).await;
    let floor = s
        .wait_until(&sid, |v| v.replay_floor > at_refusal)
        .await
        .replay_floor;

    let mut late = s.attach(&sid, ADMIN).await;
    let refused = late
        .join_with(
            serde_json::json!({ "role": "observer" }),
            serde_json::json!({ "replay_from": 1 }),
        )
        .await;
    let error = refused
        .iter()
        .filter(|f| op_of(f) == "Error")
        .map(error_of)
        .find(|e| e.code == wire::ErrorCode::ReplayOutOfRange)
        .expect("a cursor before the lost range is refused");
    assert!(
        error.message.contains(&format!("after sequence {floor}")),
        "the refusal names the floor: {error:?}"
    );

    let mut resumed = s.attach(&sid, ADMIN).await;
    let replayed = resumed
        .join_with(
            serde_json::json!({ "role": "observer" }),
            serde_json::json!({ "replay_from": floor }),
        )
        .await;
    let outputs: BTreeMap<u64, Vec<u8>> = replayed
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| (seq(f), output_bytes(f)))
        .collect();
    assert!(
        outputs.keys().all(|&n| n > floor),
        "only frames after the floor"
    );
    for (n, bytes) in &outputs {
        if let Some(seen) = live.get(n) {
            assert_eq!(seen, bytes, "frame {n} is replayed as the viewer saw it");
        }
    }
    let text: Vec<u8> = outputs.values().flatten().copied().collect();
    assert!(
        String::from_utf8_lossy(&text).contains("flood-over"),
        "replay from the floor reaches the end of the flood"
    );
}
