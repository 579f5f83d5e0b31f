use super::*;

#[test]
fn serve_defaults_match_the_interface_contract() {
    let Cli {
        command: Some(CliCommand::Serve(a)),
    } = Cli::parse_from(["ptyhost", "serve"])
    else {
        panic!("serve expected")
    };
    assert_eq!(a.listen.to_string(), "127.0.0.1:3000");
    assert_eq!(a.store.data_dir, PathBuf::from("./data"));
    assert_eq!(a.instance_id, "local");
    let s = a.settings().unwrap();
    assert_eq!(
        (
            s.replay_frames,
            s.replay_retention.as_secs(),
            s.keyframe_frames
        ),
        (1000, 86400, 100)
    );
    assert_eq!((s.max_controllers, s.max_observers), (1, 32));
    assert_eq!(a.heartbeat().unwrap().1, Duration::from_secs(90));
}

#[test]
fn inconsistent_heartbeat_is_refused() {
    let Some(CliCommand::Serve(a)) = Cli::parse_from([
        "ptyhost",
        "serve",
        "--heartbeat-interval",
        "5",
        "--heartbeat-timeout",
        "2",
    ])
    .command
    else {
        panic!()
    };
    assert!(a.settings().is_err());
}
