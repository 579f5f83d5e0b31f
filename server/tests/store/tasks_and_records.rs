use super::*;

#[tokio::test]
async fn task_writes_made_at_once_are_all_committed_and_each_task_keeps_its_last() {
    on_both_backends(async |store, b| {
        store
            .sessions()
            .insert(&session("ctx", "node-a", "running"))
            .await
            .unwrap();
        // 200 writes at once (more than one group): 100 tasks, each written twice in order.
        let writes = (0..200).map(|n| {
            let store = store.clone();
            let (id, version) = (format!("t{}", n % 100), n / 100);
            async move {
                let json = format!(r#"{{"id":"{id}","version":{version}}}"#);
                store
                    .tasks()
                    .put(&id, "ctx", "TASK_STATE_WORKING", n, &json)
                    .await
            }
        });
        for written in futures_util::future::join_all(writes).await {
            written.unwrap();
        }
        for i in 0..100 {
            let task = store.tasks().get(&format!("t{i}")).await.unwrap();
            assert!(
                task.unwrap().contains(r#""version":1"#),
                "{b}: t{i} keeps its last"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn audit_and_a202_streams_append_and_read_back_in_order() {
    on_both_backends(async |store, b| {
        for (i, session) in [(1, Some("s1")), (2, None), (3, Some("s1"))] {
            let row = AuditRow {
                at: i,
                event: format!("e{i}"),
                session_id: session.map(str::to_owned),
                token_id: Some("t".into()),
                client_id: None,
                detail: "{}".into(),
            };
            store.records().insert_audit(&row).await.unwrap();
        }
        let events: Vec<_> = (store.records().audit(Some("s1"), 10).await.unwrap())
            .into_iter()
            .map(|r| r.event)
            .collect();
        assert_eq!(events, ["e3", "e1"], "{b}: newest first");
        assert_eq!(
            store.records().audit(None, 2).await.unwrap().len(),
            2,
            "{b}"
        );

        let object = |sequence, object_id: &str| A202Row {
            transaction_id: "tx".into(),
            sequence,
            object_id: object_id.into(),
            version: 1,
            object_type: "Offer".into(),
            content_hash: format!("hash-{object_id}"),
            canonical: vec![0, 159, 255],
            carrier: "https".into(),
            received_at: "2026-12-01T00:00:00Z".into(),
        };
        store
            .records()
            .a202_append(&[object(1, "o1"), object(2, "o2")])
            .await
            .unwrap();
        assert_eq!(store.records().a202_sequence("tx").await.unwrap(), 2, "{b}");
        assert_eq!(
            store.records().a202_sequence("none").await.unwrap(),
            0,
            "{b}"
        );
        assert_eq!(
            store.records().a202_find("o2", 1).await.unwrap(),
            Some((2, "hash-o2".into())),
            "{b}"
        );
        let stream = store.records().a202_stream("tx").await.unwrap();
        assert_eq!(stream, [object(1, "o1"), object(2, "o2")], "{b}");
        assert!(
            store
                .records()
                .a202_append(&[object(3, "o1")])
                .await
                .is_err(),
            "{b}: an id and version once"
        );
    })
    .await;
}

#[tokio::test]
async fn a_dead_node_s_sessions_are_found_and_close_exactly_once() {
    on_both_backends(async |store, b| {
        store.nodes().started("a", "http://a", 1_000).await.unwrap();
        store.nodes().started("b", "http://b", 1_000).await.unwrap();
        store.nodes().seen("b", 9_000).await.unwrap();
        store
            .sessions()
            .insert(&session("sa", "a", "running"))
            .await
            .unwrap();
        store
            .sessions()
            .insert(&session("sb", "b", "running"))
            .await
            .unwrap();
        let nodes = store.nodes().all().await.unwrap();
        let seen: Vec<_> = nodes
            .iter()
            .map(|n| (n.id.as_str(), n.last_seen, n.sessions))
            .collect();
        assert_eq!(seen, [("a", 1_000, 1), ("b", 9_000, 1)], "{b}");

        let dead = store
            .nodes()
            .sessions_of_dead_nodes("b", 5_000)
            .await
            .unwrap();
        assert_eq!(
            dead.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["sa"],
            "{b}"
        );
        assert!(
            store
                .nodes()
                .sessions_of_dead_nodes("a", 5_000)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
        let last = [
            envelope(65, 9_000, "Keyframe"),
            envelope(66, 9_000, "Closed"),
        ];
        assert!(
            store
                .nodes()
                .close_abandoned("sa", &last, "node_lost", 9_000)
                .await
                .unwrap(),
            "{b}"
        );
        assert!(
            !store
                .nodes()
                .close_abandoned("sa", &last, "node_lost", 9_001)
                .await
                .unwrap(),
            "{b}"
        );
        let sa = store.sessions().get("sa").await.unwrap().unwrap();
        assert_eq!(
            (sa.state.as_str(), sa.close_reason.as_deref()),
            ("closed", Some("node_lost")),
            "{b}"
        );
        assert_eq!(sa.last_sequence, 66, "{b}");
        assert_eq!(
            store.frames().from_last_keyframe("sa").await.unwrap(),
            last,
            "{b}"
        );
        assert_eq!(
            store.nodes().get("a").await.unwrap().unwrap().sessions,
            0,
            "{b}"
        );

        assert_eq!(
            store.nodes().cluster_value("k", "first").await.unwrap(),
            "first",
            "{b}"
        );
        assert_eq!(
            store.nodes().cluster_value("k", "second").await.unwrap(),
            "first",
            "{b}"
        );
    })
    .await;
}

#[tokio::test]
async fn the_bytes_in_use_fall_when_a_closed_session_s_history_is_dropped() {
    on_both_backends(async |store, b| {
        running_session(&store, "s").await;
        let frames: Vec<_> = (1..=200)
            .map(|i| {
                let noise: Vec<u8> = (0..8192).map(|_| rand::random::<u8>()).collect();
                output(i, i as i64, &noise)
            })
            .collect();
        store.frames().insert("s", &frames).await.unwrap();
        let full = store.frames().bytes_in_use().await.unwrap();
        assert!(full >= 200 * 8192, "{b}: {full}");
        store
            .sessions()
            .close("s", None, "normal", 200, 1_000)
            .await
            .unwrap();
        store.frames().drop_history("s").await.unwrap();
        let left = store.frames().bytes_in_use().await.unwrap();
        assert!(full - left >= 1024 * 1024, "{b}: {full} -> {left}");
    })
    .await;
}
