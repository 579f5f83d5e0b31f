use super::*;

#[tokio::test]
async fn a_snapshot_taken_on_one_node_restores_on_another_and_a_pause_reaches_the_owner() {
    let Some((_db, c)) = cluster(2).await else {
        return;
    };
    let (status, created) = c[0].post("/sessions", ADMIN, json!({})).await;
    assert_eq!(status, 201, "{created}");
    let source: Session = serde_json::from_value(created).unwrap();
    let space = std::path::PathBuf::from(source.workspace.unwrap());
    std::fs::write(space.join("made-on-a"), "from node-a\n").unwrap();
    let sid = source.session_id;

    // Through node-b: the pause and the snapshot go to node-a, which runs the session.
    let (status, paused) = c[1]
        .post(&format!("/sessions/{sid}:pause"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["state"], "paused");
    let (status, taken) = c[1]
        .post(&format!("/sessions/{sid}:snapshot"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 201, "{taken}");
    let taken: control::Snapshot = serde_json::from_value(taken).unwrap();
    let (status, _) = c[1]
        .post(&format!("/sessions/{sid}:resume"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200);

    // node-b restores it: the archive is in the store, not on node-a's disk.
    let listed: control::Snapshots = c[1].get_as("/snapshots", ADMIN).await;
    assert_eq!(listed.snapshots, std::slice::from_ref(&taken));
    let (status, created) = c[1]
        .post(
            "/sessions",
            ADMIN,
            json!({ "from_snapshot": taken.snapshot_id }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let restored: Session = serde_json::from_value(created).unwrap();
    assert_eq!(restored.node_id, "node-b");
    let copy = std::path::PathBuf::from(restored.workspace.unwrap());
    assert_eq!(
        std::fs::read_to_string(copy.join("made-on-a")).unwrap(),
        "from node-a\n"
    );
}
