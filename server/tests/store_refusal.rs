//! A write the store refuses is never silent: while another process holds the database's
//! write lock, `/readyz` turns red, the session's output waits instead of being lost, and
//! once the lock goes every frame a viewer saw is in the store as it saw it.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};

const LINES: usize = 300;

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
    let options = SqliteConnectOptions::new().filename(s.dir.join("ptyhost.db"));
    let mut locker = SqliteConnection::connect_with(&options).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    until_ready_is(&s, 503).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
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
