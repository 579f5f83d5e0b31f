use super::*;

#[tokio::test]
async fn sessions_round_trip_and_pooled_ones_stay_hidden() {
    on_both_backends(async |store, b| {
        let row = session("s1", "node-a", "running");
        store.sessions().insert(&row).await.unwrap();
        assert_eq!(
            store.sessions().get("s1").await.unwrap(),
            Some(row.clone()),
            "{b}"
        );
        assert_eq!(
            store.sessions().start_size("s1").await.unwrap(),
            Some((80, 24)),
            "{b}"
        );
        store.sessions().set_size("s1", 120, 40).await.unwrap();
        let resized = store.sessions().get("s1").await.unwrap().unwrap();
        assert_eq!((resized.cols, resized.rows), (120, 40), "{b}");
        assert_eq!(
            store.sessions().start_size("s1").await.unwrap(),
            Some((80, 24)),
            "{b}"
        );

        store
            .sessions()
            .insert(&session("p1", "node-a", "pooled"))
            .await
            .unwrap();
        assert_eq!(
            store.sessions().get("p1").await.unwrap(),
            None,
            "{b}: pooled is hidden"
        );
        let listed: Vec<_> = store.sessions().list("local").await.unwrap();
        assert_eq!(
            listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["s1"],
            "{b}"
        );
        store
            .sessions()
            .close("p1", Some(0), "normal", 3, 5)
            .await
            .unwrap();
        assert!(
            store.sessions().take_pooled("p1", 9).await.unwrap(),
            "{b}: an ended pooled shell stays pooled"
        );
        assert!(
            !store.sessions().take_pooled("p1", 9).await.unwrap(),
            "{b}: taken once"
        );
        store
            .sessions()
            .insert(&session("p2", "node-a", "pooled"))
            .await
            .unwrap();
        store
            .frames()
            .insert("p2", &[output(1, 1, b"x")])
            .await
            .unwrap();
        store.sessions().delete_pooled(None).await.unwrap();
        assert!(
            !store.sessions().take_pooled("p2", 9).await.unwrap(),
            "{b}: deleted"
        );
        assert!(
            store
                .frames()
                .between("p2", 0, 10)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );

        store
            .sessions()
            .insert(&session("old", "", "running"))
            .await
            .unwrap();
        store
            .sessions()
            .insert(&session("other", "node-b", "running"))
            .await
            .unwrap();
        let mut mine: Vec<_> = (store.sessions().running("node-a").await.unwrap())
            .into_iter()
            .map(|s| s.id)
            .collect();
        mine.sort();
        assert_eq!(
            mine,
            ["old", "p1", "s1"],
            "{b}: this node's, and those from before nodes"
        );

        store
            .sessions()
            .close("s1", Some(3), "normal", 7, 99)
            .await
            .unwrap();
        let closed = store.sessions().get("s1").await.unwrap().unwrap();
        assert_eq!(
            (
                closed.state.as_str(),
                closed.exit_code,
                closed.last_sequence,
                closed.closed_at
            ),
            ("closed", Some(3), 7, Some(99)),
            "{b}"
        );
    })
    .await;
}

#[tokio::test]
async fn tokens_are_found_by_hash_listed_by_share_link_and_revoked_once() {
    on_both_backends(async |store, b| {
        for (id, kind, session) in [("t1", "cli", None), ("t2", "share", Some("s1"))] {
            store
                .tokens()
                .insert(NewToken {
                    id,
                    hash: &format!("hash-{id}"),
                    scope: "pty:observe",
                    session_id: session,
                    label: Some("l"),
                    kind,
                    created_at: 10,
                    expires_at: None,
                })
                .await
                .unwrap();
        }
        assert_eq!(
            store.tokens().by_hash("hash-t2").await.unwrap().unwrap().id,
            "t2",
            "{b}"
        );
        assert_eq!(store.tokens().by_hash("nope").await.unwrap(), None, "{b}");
        assert_eq!(store.tokens().count().await.unwrap(), 2, "{b}");
        let ids = ["t1".to_owned(), "t2".to_owned(), "gone".to_owned()];
        let mut found: Vec<_> = (store.tokens().by_ids(&ids).await.unwrap())
            .into_iter()
            .map(|t| t.id)
            .collect();
        found.sort();
        assert_eq!(found, ["t1", "t2"], "{b}");
        let links = store.tokens().list(Some(("s1", 0))).await.unwrap();
        assert_eq!(links.len(), 1, "{b}");
        assert!(
            !store.tokens().revoke("t1", Some("s1"), 20).await.unwrap(),
            "{b}: not a link of s1"
        );
        assert!(
            store.tokens().revoke("t2", Some("s1"), 20).await.unwrap(),
            "{b}"
        );
        assert!(
            !store.tokens().revoke("t2", None, 21).await.unwrap(),
            "{b}: revoked once"
        );
        let t2 = store.tokens().by_hash("hash-t2").await.unwrap().unwrap();
        assert_eq!(t2.revoked_at, Some(20), "{b}");
        assert!(
            store
                .tokens()
                .list(Some(("s1", 0)))
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
    })
    .await;
}

#[tokio::test]
async fn frames_come_back_as_they_went_in_and_are_found_by_sequence_time_keyframe_and_kind() {
    on_both_backends(async |store, b| {
        running_session(&store, "s").await;
        let text = b"cargo build: Compiling some-crate v1.2.3\r\n".repeat(1600);
        let noise: Vec<u8> = (0..65536).map(|_| rand::random::<u8>()).collect();
        let frames = vec![
            envelope(1, 100, "Resize"),
            output(2, 100, b"a"),
            output(3, 200, &text),
            envelope(4, 300, "Keyframe"),
            output(5, 300, &noise),
            envelope(6, 400, "Keyframe"),
            output(7, 500, b"after"),
        ];
        let stored = store.frames().insert("s", &frames).await.unwrap();
        assert!(
            stored < (text.len() + noise.len()) as u64,
            "{b}: the text is compressed"
        );
        assert!(
            stored >= noise.len() as u64,
            "{b}: noise is stored as it is"
        );
        assert_eq!(
            store.frames().session_bytes("s").await.unwrap(),
            stored,
            "{b}"
        );
        assert_eq!(
            store.frames().between("s", 0, 8).await.unwrap(),
            frames,
            "{b}"
        );
        assert_eq!(
            store
                .sessions()
                .get("s")
                .await
                .unwrap()
                .unwrap()
                .last_sequence,
            7,
            "{b}"
        );
        let page = store.frames().from("s", 3, 2).await.unwrap();
        assert_eq!(page, frames[2..4], "{b}");
        assert_eq!(
            store.frames().sequence_at("s", 350).await.unwrap(),
            Some(5),
            "{b}"
        );
        assert_eq!(
            store.frames().sequence_at("s", 50).await.unwrap(),
            None,
            "{b}"
        );
        assert_eq!(
            store.frames().keyframe_before("s", 5).await.unwrap(),
            Some(4),
            "{b}"
        );
        assert_eq!(
            store.frames().keyframe_before("s", 3).await.unwrap(),
            None,
            "{b}"
        );
        assert_eq!(
            store.frames().from_last_keyframe("s").await.unwrap(),
            frames[5..],
            "{b}"
        );
        let first = store
            .frames()
            .first_sized_frame("s")
            .await
            .unwrap()
            .unwrap();
        assert!(String::from_utf8(first).unwrap().contains("Resize"), "{b}");
        // Frames of some kinds only, in order, a page at a time.
        let marked = store
            .frames()
            .of_kinds("s", &["Resize", "Keyframe"], 1, 2)
            .await
            .unwrap();
        assert_eq!(marked, [frames[0].clone(), frames[3].clone()], "{b}");
        let rest = store
            .frames()
            .of_kinds("s", &["Resize", "Keyframe"], 5, 2)
            .await
            .unwrap();
        assert_eq!(rest, frames[5..6], "{b}");
    })
    .await;
}

#[tokio::test]
async fn a_batch_of_more_frames_than_one_statement_writes_is_stored_whole_and_in_order() {
    on_both_backends(async |store, b| {
        running_session(&store, "s").await;
        let long = b"a line of output that LZ4 makes smaller\r\n".repeat(40);
        let frames: Vec<_> = (1..=150)
            .map(|i| match i % 3 {
                0 => envelope(i, i as i64, "Resize"),
                1 => output(i, i as i64, format!("echo {i}").as_bytes()),
                _ => output(i, i as i64, &long),
            })
            .collect();
        let stored = store.frames().insert("s", &frames).await.unwrap();
        assert_eq!(
            store.frames().between("s", 0, 151).await.unwrap(),
            frames,
            "{b}"
        );
        assert_eq!(
            store.frames().session_bytes("s").await.unwrap(),
            stored,
            "{b}"
        );
        assert!(
            stored < (50 * long.len()) as u64,
            "{b}: the long output is compressed"
        );
        let row = store.sessions().get("s").await.unwrap().unwrap();
        assert_eq!(row.last_sequence, 150, "{b}");
    })
    .await;
}

#[tokio::test]
async fn pruning_drops_a_prefix_and_raises_the_replay_floor_and_reservations_only_grow() {
    on_both_backends(async |store, b| {
        running_session(&store, "s").await;
        let frames: Vec<_> = (1..=10)
            .map(|i| output(i, i as i64 * 10, &[b'x'; 100]))
            .collect();
        store.frames().insert("s", &frames).await.unwrap();
        assert_eq!(
            store.frames().prune("s", 3, 1_000).await.unwrap(),
            Some(3),
            "{b}"
        );
        assert_eq!(
            store.frames().prune("s", 8, 45).await.unwrap(),
            Some(4),
            "{b}: bounded by time"
        );
        assert_eq!(
            store
                .sessions()
                .get("s")
                .await
                .unwrap()
                .unwrap()
                .replay_floor,
            4,
            "{b}"
        );
        assert_eq!(
            store.frames().prune_to_bytes("s", 250).await.unwrap(),
            Some(8),
            "{b}"
        );
        assert_eq!(store.frames().session_bytes("s").await.unwrap(), 200, "{b}");
        store.frames().raise_replay_floor("s", 2).await.unwrap();
        assert_eq!(
            store
                .sessions()
                .get("s")
                .await
                .unwrap()
                .unwrap()
                .replay_floor,
            8,
            "{b}: never lowered"
        );
        store.frames().reserve_sequences("s", 500).await.unwrap();
        store.frames().reserve_sequences("s", 100).await.unwrap();
        assert_eq!(
            store
                .sessions()
                .get("s")
                .await
                .unwrap()
                .unwrap()
                .sequence_reserved,
            500,
            "{b}"
        );

        store
            .sessions()
            .close("s", None, "normal", 10, 1_000)
            .await
            .unwrap();
        store
            .tasks()
            .put("t", "s", "TASK_STATE_COMPLETED", 5, "{}")
            .await
            .unwrap();
        assert_eq!(
            store.frames().closed_with_history(None, 10).await.unwrap(),
            ["s"],
            "{b}"
        );
        assert!(
            store
                .frames()
                .closed_with_history(Some(1_000), 10)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
        store.frames().drop_history("s").await.unwrap();
        assert!(
            store
                .frames()
                .closed_with_history(None, 10)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
        assert_eq!(store.tasks().get("t").await.unwrap(), None, "{b}");
    })
    .await;
}

#[tokio::test]
async fn tasks_are_replaced_filtered_paged_and_found_unfinished_by_context_and_node() {
    on_both_backends(async |store, b| {
        store
            .sessions()
            .insert(&session("here", "node-a", "running"))
            .await
            .unwrap();
        store
            .sessions()
            .insert(&session("there", "node-b", "running"))
            .await
            .unwrap();
        /// The store keeps a task's JSON as it is given; these hold only an id and a state.
        #[derive(serde::Deserialize)]
        struct Stored {
            id: String,
        }
        let put = |id: &'static str, ctx: &'static str, state: &'static str, at: i64| {
            let store = store.clone();
            async move {
                let json = format!(r#"{{"id":"{id}","state":"{state}"}}"#);
                store.tasks().put(id, ctx, state, at, &json).await.unwrap();
            }
        };
        put("t1", "here", "TASK_STATE_WORKING", 10).await;
        put("t2", "there", "TASK_STATE_WORKING", 20).await;
        put("t3", "here", "TASK_STATE_COMPLETED", 30).await;
        put("t4", "nowhere", "TASK_STATE_SUBMITTED", 40).await;
        put("t1", "here", "TASK_STATE_FAILED", 50).await;
        assert!(
            store
                .tasks()
                .get("t1")
                .await
                .unwrap()
                .unwrap()
                .contains("FAILED"),
            "{b}: replaced"
        );

        let all = TaskFilter {
            limit: 2,
            ..TaskFilter::default()
        };
        let (page, total) = store.tasks().list(&all).await.unwrap();
        assert_eq!(total, 4, "{b}");
        let ids: Vec<_> = page.iter().map(|(_, id, _)| id.as_str()).collect();
        assert_eq!(ids, ["t1", "t4"], "{b}: newest status first");
        let (at, id, _) = &page[1];
        let next = TaskFilter {
            after: Some((*at, id)),
            limit: 10,
            ..TaskFilter::default()
        };
        let ids: Vec<_> = (store.tasks().list(&next).await.unwrap().0)
            .into_iter()
            .map(|(_, id, _)| id)
            .collect();
        assert_eq!(ids, ["t3", "t2"], "{b}");
        let here = TaskFilter {
            context_id: Some("here"),
            state: Some("TASK_STATE_COMPLETED"),
            status_after_ms: Some(25),
            limit: 10,
            ..TaskFilter::default()
        };
        assert_eq!(store.tasks().list(&here).await.unwrap().1, 1, "{b}");

        let unfinished = |of| {
            let store = store.clone();
            async move {
                let mut ids: Vec<String> = (store.tasks().unfinished(of).await.unwrap())
                    .iter()
                    .map(|j| serde_json::from_str::<Stored>(j).unwrap().id)
                    .collect();
                ids.sort();
                ids
            }
        };
        assert_eq!(unfinished(TasksOf::Context("there")).await, ["t2"], "{b}");
        assert_eq!(
            unfinished(TasksOf::Node("node-a")).await,
            ["t4"],
            "{b}: in no session"
        );
        assert_eq!(
            unfinished(TasksOf::Node("node-b")).await,
            ["t2", "t4"],
            "{b}"
        );

        for (id, at) in [("c1", 1), ("c2", 2), ("c3", 3)] {
            let config = PushConfigRow {
                task_id: "t2".into(),
                id: id.into(),
                version: "1.0".into(),
                config: "{}".into(),
                created_at: at,
            };
            store.tasks().put_push(&config).await.unwrap();
        }
        let after: Vec<_> = (store.tasks().pushes("t2", Some("c1"), 10).await.unwrap())
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(after, ["c2", "c3"], "{b}");
        assert_eq!(
            store.tasks().pushes("t2", None, 1).await.unwrap().len(),
            1,
            "{b}"
        );
        assert!(store.tasks().delete_push("t2", "c2").await.unwrap(), "{b}");
        assert!(!store.tasks().delete_push("t2", "c2").await.unwrap(), "{b}");
        assert_eq!(store.tasks().push("t2", "c2").await.unwrap(), None, "{b}");
    })
    .await;
}
