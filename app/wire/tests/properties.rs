//! Properties of the pty-ws decoders and encoders, over generated input: what is encoded
//! decodes to itself, and no input, however malformed, makes a decoder panic.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use serde_json::{Value, json};
use wire::a2a::{StreamResponse, Task, TaskState, TaskStatus};
use wire::server::{
    Done, ErrorPayload, Goodbye, ServerFrame, ServerOp, StreamAccepted, SubscribeAccepted,
    TaskAnswer, TaskPage, TaskUpdate,
};
use wire::{
    Ack, Base64Bytes, ClientOp, CloseReason, Dim, ErrorCode, JoinSession, OutputStream, Ping, Pong,
    Role, SessionFrame, SessionResize, TaskOp, TaskRef, binary_output, executor_output,
    parse_binary_output,
};

/// The verbs a client may name beside the A2A operations (`wire::CORE_OPERATIONS`), and
/// ones it may not.
const VERBS: [&str; 13] = [
    "pty.join_session",
    "pty.leave_session",
    "pty.session_input",
    "pty.session_resize",
    "pty.request_role",
    "pty.release_role",
    "pty.request_keyframe",
    "ping",
    "ptyhost.ack",
    "Unsubscribe",
    "UpdateServiceParameters",
    "pty.session_frame",
    "nope",
];

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A client envelope: a known or unknown verb, any id and payload, now and then a field a
/// client must not send.
fn envelope() -> impl Strategy<Value = Value> {
    let ops: Vec<&str> = VERBS.into_iter().chain(wire::CORE_OPERATIONS).collect();
    (
        prop::sample::select(ops),
        ".{0,8}",
        json_value(),
        any::<bool>(),
    )
        .prop_map(|(op, id, payload, extra)| {
            let mut env =
                json!({ "op": op, "id": id, "ts": "2026-12-03T00:00:00Z", "payload": payload });
            if extra {
                env["sequence"] = json!(1);
            }
            env
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_binary_output_frame_decodes_to_its_sequence_and_bytes(seq in any::<u64>(), data in prop::collection::vec(any::<u8>(), 0..512)) {
        let frame = binary_output(seq, &data);
        prop_assert_eq!(parse_binary_output(&frame), Some((seq, wire::BINARY_STREAM_PTY, data.as_slice())));
    }

    #[test]
    fn any_bytes_read_as_a_binary_output_frame_reencode_to_themselves_or_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let bytes = if bytes.len() > 4 && bytes[0] % 2 == 0 { [b"PW1O".as_slice(), &bytes[4..]].concat() } else { bytes };
        if let Some((seq, stream, data)) = parse_binary_output(&bytes) {
            let mut again = binary_output(seq, data);
            again[12] = stream;
            prop_assert_eq!(again, bytes);
        }
    }

    #[test]
    fn an_executor_output_frame_carries_its_sequence_and_bytes(seq in any::<u64>(), data in prop::collection::vec(any::<u8>(), 0..512)) {
        let frame: Value = serde_json::from_slice(&executor_output(seq, "2026-12-03T00:00:00Z", &data)).unwrap();
        prop_assert_eq!(&frame["op"], "output");
        prop_assert_eq!(frame["seq"].as_u64(), Some(seq));
        let decoded = STANDARD.decode(frame["payload"]["data"].as_str().unwrap()).unwrap();
        prop_assert_eq!(decoded, data);
    }

    #[test]
    fn no_text_makes_the_client_frame_decoder_panic(text in ".{0,200}") {
        let _ = ClientOp::decode(&text);
    }

    #[test]
    fn no_envelope_makes_the_client_frame_decoder_panic_and_a_refusal_keeps_its_id(env in envelope()) {
        match ClientOp::decode(&env.to_string()) {
            Ok(decoded) => prop_assert_eq!(Some(decoded.envelope.id.as_str()), env["id"].as_str()),
            Err((Some(id), _)) => prop_assert_eq!(Some(id.as_str()), env["id"].as_str()),
            Err((None, _)) => prop_assert!(env["id"].as_str().is_none_or(str::is_empty) || env.get("sequence").is_some()),
        }
    }

    #[test]
    fn session_input_decodes_to_the_bytes_it_carries(data in prop::collection::vec(any::<u8>(), 0..256)) {
        let env = json!({ "op": "pty.session_input", "id": "in-1", "ts": "2026-12-03T00:00:00Z",
                          "payload": { "data": STANDARD.encode(&data) } });
        let decoded = ClientOp::decode(&env.to_string()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(decoded.op, ClientOp::Input(data));
    }
}

/// A task in one of the states a session's task passes through.
fn task() -> impl Strategy<Value = Task> {
    let states = prop_oneof![
        Just(TaskState::Submitted),
        Just(TaskState::Working),
        Just(TaskState::Completed),
        Just(TaskState::Failed),
        Just(TaskState::Canceled),
    ];
    ("[a-z0-9-]{1,12}", "[a-z0-9-]{1,12}", states).prop_map(|(id, context_id, state)| Task {
        id,
        context_id,
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some("2026-12-03T00:00:00Z".into()),
        },
        artifacts: None,
        history: Vec::new(),
        metadata: None,
    })
}

/// Any frame the server sends in the spec's JSON shape.
fn server_op() -> impl Strategy<Value = ServerOp> {
    let codes = prop_oneof![
        Just(ErrorCode::TaskNotFound),
        Just(ErrorCode::InvalidRequest),
        Just(ErrorCode::RateLimited),
        Just(ErrorCode::ReplayOutOfRange),
    ];
    prop_oneof![
        ".{0,16}".prop_map(|reason| ServerOp::Goodbye(Goodbye { reason })),
        (codes, ".{0,24}", any::<Option<u64>>()).prop_map(|(code, message, oldest)| {
            let mut error = ErrorPayload::new(code, &message);
            error.oldest = oldest;
            ServerOp::Error(Box::new(error))
        }),
        (any::<u64>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(_, data)| {
            ServerOp::Session(SessionFrame::Output {
                stream: OutputStream::Stdout,
                data: Base64Bytes(data),
            })
        }),
        (any::<Option<i32>>(), ".{0,12}").prop_map(|(exit_code, detail)| {
            ServerOp::Session(SessionFrame::Closed {
                exit_code,
                reason: CloseReason::Normal,
                detail: Some(detail),
            })
        }),
        ".{0,12}".prop_map(|t| ServerOp::Pong(Pong {
            client_ts: t.clone(),
            server_ts: t
        })),
        task().prop_map(|task| ServerOp::GetTask(Box::new(TaskAnswer { task }))),
        (prop::collection::vec(task(), 0..3), ".{0,8}").prop_map(|(tasks, next_page_token)| {
            ServerOp::ListTasks(TaskPage {
                tasks,
                next_page_token,
            })
        }),
        "[a-z0-9-]{1,12}".prop_map(|task_id| ServerOp::StreamAccepted(StreamAccepted { task_id })),
        any::<u64>().prop_map(|current_sequence| {
            ServerOp::SubscribeAccepted(SubscribeAccepted { current_sequence })
        }),
        task().prop_map(|task| {
            let task_id = task.id.clone();
            let delta = StreamResponse::Task(task.clone());
            ServerOp::TaskUpdate(Box::new(TaskUpdate {
                task,
                delta,
                task_id,
            }))
        }),
        Just(ServerOp::Unsubscribed(Done {})),
        Just(ServerOp::ServiceParametersUpdated(Done {})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_server_frame_decodes_to_itself(op in server_op(), sequence in any::<Option<u64>>(), id in "[a-z0-9-]{1,16}") {
        let frame = ServerFrame { id, ts: "2026-12-03T00:00:00Z".into(), sequence, service_parameters: None, op };
        let text = frame.to_text();
        let back = ServerFrame::decode(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let raw: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(raw["op"].as_str(), Some(frame.op.name()), "name() is the op on the wire");
        prop_assert_eq!(back, frame);
    }

    #[test]
    fn the_session_envelope_encoder_writes_what_the_frame_decoder_reads(data in prop::collection::vec(any::<u8>(), 0..256), sequence in any::<u64>()) {
        let output = SessionFrame::Output { stream: OutputStream::Stdout, data: Base64Bytes(data) };
        let bytes = wire::server::encode_envelope(wire::OP_SESSION_FRAME, "f-1", "2026-12-03T00:00:00Z", Some(sequence), &output);
        let frame = ServerFrame::decode(std::str::from_utf8(&bytes).unwrap()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(frame.sequence, Some(sequence));
        prop_assert_eq!(frame.op, ServerOp::Session(output));
    }

    #[test]
    fn no_text_makes_the_server_frame_decoder_panic(env in envelope()) {
        let _ = ServerFrame::decode(&env.to_string());
    }
}

/// Any pty-ws operation a client sends beside the A2A messages.
fn client_op() -> impl Strategy<Value = ClientOp> {
    let role = prop_oneof![Just(Role::Controller), Just(Role::Observer)];
    let dim = (1u16..=1024).prop_map(Dim);
    prop_oneof![
        (prop::option::of(role.clone()), prop::option::of(".{0,12}")).prop_map(
            |(role, client_label)| {
                ClientOp::Join(JoinSession {
                    role,
                    client_label,
                    ..JoinSession::default()
                })
            }
        ),
        Just(ClientOp::Leave),
        prop::collection::vec(any::<u8>(), 0..128).prop_map(ClientOp::Input),
        (dim.clone(), dim).prop_map(|(cols, rows)| ClientOp::Resize(SessionResize { cols, rows })),
        role.prop_map(ClientOp::RequestRole),
        Just(ClientOp::ReleaseRole),
        Just(ClientOp::RequestKeyframe),
        ".{0,12}".prop_map(|client_ts| ClientOp::Ping(Ping { client_ts })),
        (any::<u64>(), prop::option::of(any::<u32>())).prop_map(|(sequence, window_bytes)| {
            ClientOp::Ack(Ack {
                sequence,
                window_bytes,
            })
        }),
        ("[a-z0-9-]{1,12}", prop::option::of(any::<u32>())).prop_map(
            |(task_id, history_length)| {
                ClientOp::Task(TaskOp::GetTask(TaskRef {
                    task_id,
                    history_length,
                }))
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_client_frame_decodes_to_the_operation_it_encodes(op in client_op(), replay_from in any::<Option<u64>>()) {
        let text = op.encode("c-1", "2026-12-03T00:00:00Z", replay_from);
        let decoded = ClientOp::decode(&text).map_err(|e| TestCaseError::fail(format!("{e:?}: {text}")))?;
        prop_assert_eq!(decoded.envelope.op.as_str(), op.name());
        prop_assert_eq!(decoded.envelope.replay_from, replay_from);
        prop_assert_eq!(decoded.op, op);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_task_event_goes_through_both_0_3_shapes_unchanged(task in task()) {
        let event = StreamResponse::Task(task);
        let rpc = serde_json::to_value(wire::v03::Event::from(&event)).unwrap();
        let rpc: wire::v03::Event = serde_json::from_value(rpc).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(StreamResponse::try_from(rpc).map_err(|e| TestCaseError::fail(e.0))?, event.clone());
        let rest = serde_json::to_value(wire::v03::rest::Event::from(&event)).unwrap();
        let rest: wire::v03::rest::Event = serde_json::from_value(rest).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(StreamResponse::try_from(rest).map_err(|e| TestCaseError::fail(e.0))?, event);
    }

    #[test]
    fn no_json_makes_the_rpc_stdio_or_0_3_decoders_panic(value in json_value()) {
        let _ = serde_json::from_value::<wire::rpc::JsonRpcResponse<Value>>(value.clone());
        let _ = serde_json::from_value::<wire::rpc::StatusBody>(value.clone());
        let _ = serde_json::from_value::<wire::stdio::Opening>(value.clone());
        if let Ok(e) = serde_json::from_value::<wire::v03::Event>(value.clone()) {
            let _ = StreamResponse::try_from(e);
        }
        if let Ok(e) = serde_json::from_value::<wire::v03::rest::Event>(value) {
            let _ = StreamResponse::try_from(e);
        }
    }
}
