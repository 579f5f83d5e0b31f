//! Properties of the server's decoders over generated input: the STDIO binding's
//! `Content-Length` frames, JSON without duplicate keys, RFC 8785 canonical JSON (A202's
//! hashes and idempotency keys), the files API's paths, A2A tasks through protobuf and
//! 0.3 JSON, and A202 objects. What is encoded decodes to
//! itself; no input makes a decoder panic or allocate past its bound; no path resolves
//! outside a session's directory.

use std::path::{Component, Path};
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::Value;
use server::a2a::v03;
use server::a202::canonical::{Kernel, canonical};
use server::a202::keys::Keyring;
use server::a202::object;
use server::bindings::proto;
use server::files::RelPath;
use server::framing::{FrameReader, Incoming, frame, frame_with};
use server::json::parse_unique;
use wire::a2a::{Message, Part, Role, Task, TaskState, TaskStatus};

const MAX_BODY: usize = 4096;

/// Every frame a reader takes from `bytes`, and how it stopped.
fn read_all(bytes: &[u8]) -> (Vec<Vec<u8>>, Incoming) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut reader = FrameReader::new(bytes, MAX_BODY);
        let mut frames = Vec::new();
        loop {
            match reader.next().await {
                Incoming::Frame(body) => frames.push(body),
                end => return (frames, end),
            }
        }
    })
}

/// Any JSON value, nested a few levels (numbers as JSON has them: integers and finite floats).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn stdio_frames_written_one_after_another_are_read_back_whole(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..MAX_BODY), 0..4),
        routed in any::<bool>(),
    ) {
        let bytes: Vec<u8> = bodies.iter().flat_map(|b| match routed {
            true => frame_with("application/x-protobuf", &[("A2A-Kind", "request"), ("A2A-Id", "7")], b),
            false => frame(b),
        }).collect();
        let (frames, end) = read_all(&bytes);
        prop_assert_eq!(frames, bodies);
        prop_assert_eq!(end, Incoming::Eof);
    }

    #[test]
    fn no_bytes_make_the_stdio_frame_reader_panic_or_take_more_than_its_bound(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        header in "(Content-Length: [0-9]{1,25}\r\n|Content-Type: a/b\r\n|X: y\r\n|\r\n| \r\n|\n)*",
    ) {
        let (frames, end) = read_all(&[header.as_bytes(), &bytes].concat());
        prop_assert!(frames.iter().all(|f| f.len() <= MAX_BODY));
        prop_assert!(matches!(end, Incoming::Eof | Incoming::TooLarge(_) | Incoming::Malformed(_)));
    }

    #[test]
    fn json_without_duplicate_keys_reads_back_what_was_written(value in json_value()) {
        prop_assert_eq!(parse_unique(value.to_string().as_bytes()).unwrap(), value);
    }

    #[test]
    fn no_bytes_make_the_duplicate_key_parser_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), text in "[\\[\\]{}:,\"a0-9 .eE+-]{0,64}") {
        let _ = parse_unique(&bytes);
        let _ = parse_unique(text.as_bytes());
    }

    #[test]
    fn canonical_json_is_the_same_value_and_canonical_again(value in json_value()) {
        let bytes = canonical(&value);
        let again: Value = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(canonical(&again), bytes);
    }

    #[test]
    fn no_path_a_caller_gives_resolves_outside_the_sessions_directory(
        path in prop::collection::vec(prop_oneof![Just("..".to_owned()), Just(".".to_owned()), Just("".to_owned()), Just("/".to_owned()), "[a-z.\\\\~]{1,4}"], 0..6),
    ) {
        let given = path.join("/");
        if let Ok(rel) = RelPath::parse(&given) {
            prop_assert!(rel.as_path().components().all(|c| matches!(c, Component::Normal(_))), "{given:?} -> {:?}", rel.as_path());
            let root = Path::new("/srv/session");
            prop_assert!(root.join(rel.as_path()).starts_with(root));
        }
    }
}

/// A 1.0 task with a status message of text parts, as a session's command leaves it.
fn task() -> impl Strategy<Value = Task> {
    let states = prop_oneof![
        Just(TaskState::Submitted),
        Just(TaskState::Working),
        Just(TaskState::InputRequired),
        Just(TaskState::Completed),
        Just(TaskState::Failed),
        Just(TaskState::Canceled),
    ];
    let text = prop::collection::vec("[ -~]{0,24}", 1..3);
    ("[a-z0-9-]{1,16}", "[a-z0-9-]{1,16}", states, text).prop_map(
        |(id, context_id, state, texts)| {
            let message = Message {
                message_id: format!("m-{id}"),
                context_id: Some(context_id.clone()),
                task_id: Some(id.clone()),
                role: Role::Agent,
                parts: texts.into_iter().map(Part::text).collect(),
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            };
            Task {
                id,
                context_id,
                status: TaskStatus {
                    state,
                    message: Some(message),
                    timestamp: Some("2026-12-03T10:00:00Z".into()),
                },
                artifacts: None,
                history: Vec::new(),
                metadata: None,
            }
        },
    )
}

/// The kernel schema compiled once, and a keyring that knows no key.
fn a202() -> &'static (Kernel, Keyring) {
    static A202: OnceLock<(Kernel, Keyring)> = OnceLock::new();
    A202.get_or_init(|| {
        let kernel = Kernel::default();
        let keys = Keyring::from_records(&[], &kernel).expect("an empty keyring");
        (kernel, keys)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_task_in_protojson_goes_through_protobuf_and_back_unchanged(task in task()) {
        let json = serde_json::to_value(&task).unwrap();
        let bytes = proto::encode("lf.a2a.v1.Task", &json).map_err(TestCaseError::fail)?;
        let back = proto::decode("lf.a2a.v1.Task", &bytes).map_err(TestCaseError::fail)?;
        let back: Task = serde_json::from_value(back).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, task);
    }

    #[test]
    fn a_task_in_0_3_json_reads_back_as_the_same_1_0_task(task in task()) {
        let legacy = v03::task(&task);
        let back = v03::task_in(legacy, false).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, task);
    }

    #[test]
    fn a_task_in_0_3_rest_protojson_reads_back_as_the_same_1_0_task(task in task()) {
        let legacy = v03::rest::task(&task);
        let back = v03::task_in(legacy, true).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, task);
    }

    #[test]
    fn no_bytes_make_the_protobuf_decoder_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), method in prop::sample::select(vec!["SendMessage", "GetTask", "ListTasks", "CancelTask"])) {
        let (request, answer, _) = proto::method_types(method).unwrap();
        let _ = proto::decode(request, &bytes);
        let _ = proto::decode(answer, &bytes);
    }

    #[test]
    fn no_bytes_or_json_make_the_a202_verifier_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), value in json_value()) {
        let (kernel, keys) = a202();
        prop_assert!(object::verify(kernel, keys, &bytes).is_err(), "noise is never a verified object");
        let _ = object::verify(kernel, keys, &canonical(&value));
    }
}
