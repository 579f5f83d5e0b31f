//! A crash reuses no sequence: after SIGKILL during floods, a restarted server numbers the
//! recovered sessions' last frames above every sequence a viewer saw, and replay from any
//! sequence the viewer saw gives back what it saw.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use wire::server::ServerOp;

const FLOOD: &str = "i=0; while :; do i=$((i+1)); echo flood-line-$i; done";

/// Every numbered frame `c` receives for `span`: sequence -> its op and payload.
async fn watch_for(c: &mut Client, span: Duration) -> BTreeMap<u64, ServerOp> {
    let mut seen = BTreeMap::new();
    let end = Instant::now() + span;
    while Instant::now() < end {
        let Some(f) = c.try_next(Duration::from_millis(200)).await else {
            continue;
        };
        let f = typed(&f);
        if let Some(s) = f.sequence {
            seen.insert(s, f.op);
        }
    }
    seen
}

#[tokio::test]
async fn after_a_sigkill_during_floods_no_sequence_a_viewer_saw_is_reused() {
    let mut s = TestServer::start(&[]).await;
    let mut sids = Vec::new();
    for _ in 0..4 {
        sids.push(s.command_session(FLOOD).await);
    }
    let mut viewer = s.attach(&sids[0], ADMIN).await;
    viewer.join("observer").await;
    let seen = watch_for(&mut viewer, Duration::from_millis(1500)).await;
    s.crash_and_restart(&[]).await;

    let (&first, &last) = (seen.keys().next().unwrap(), seen.keys().last().unwrap());
    let closed = s.wait_closed(&sids[0]).await;
    assert!(
        closed.current_sequence > last,
        "the recovered session numbers on above {last}: {closed:?}"
    );
    for from in [first, (first + last) / 2, last - 1, last] {
        let frames = s.replay_closed(&sids[0], from).await;
        let numbered: Vec<&Value> = frames
            .iter()
            .filter(|f| typed(f).sequence.is_some())
            .collect();
        assert!(
            numbered.iter().any(|f| kind(f) == "Closed"),
            "replay from {from} ends with the session's Closed"
        );
        for f in numbered {
            let n = seq(f);
            assert!(n > from, "replay from {from} gave {n}");
            if let Some(saw) = seen.get(&n) {
                assert_eq!(
                    &typed(f).op,
                    saw,
                    "sequence {n} came back as something else"
                );
            } else {
                assert!(
                    n > last || kind(f) == "Output",
                    "sequence {n} is new but numbered among those seen: {f}"
                );
            }
        }
    }
}
