use super::*;

#[test]
fn close_reasons_are_named_as_they_serialize() {
    use CloseReason::*;
    for reason in [Normal, Killed, Timeout, InstanceTerminated, Error, NodeLost] {
        let json = serde_json::to_value(reason).unwrap();
        assert_eq!(json, reason.as_str(), "{reason:?}");
    }
    assert_eq!(NodeLost.as_str(), "node_lost");
}

#[test]
fn binary_frames_round_trip() {
    let frame = binary_output(0x0102_0304_0506_0708, b"hi\x1b[0m");
    assert_eq!(&frame[..13], b"PW1O\x01\x02\x03\x04\x05\x06\x07\x08\x01");
    assert_eq!(
        parse_binary_output(&frame),
        Some((0x0102_0304_0506_0708, 1, b"hi\x1b[0m".as_slice()))
    );
    assert_eq!(parse_binary_output(b"PW1O\x00\x00"), None);
    assert_eq!(parse_binary_output(b"PW1I1234567890"), None);
    assert_eq!(binary_input(b"ls\r"), b"PW1Ils\r");
}

#[test]
fn output_written_directly_is_what_serde_writes_byte_for_byte() {
    for data in [
        &b""[..],
        b"a",
        b"hi\x1b[0m\r\n",
        &[0xff, 0x00, 0xc2, 0x9b, 0x22, 0x5c][..],
    ] {
        let frame = SessionFrame::Output {
            stream: OutputStream::Stdout,
            data: Base64Bytes(data.to_vec()),
        };
        let (id, ts) = ("0190-id", "2026-12-04T00:00:00.000Z");
        assert_eq!(
            String::from_utf8(output_envelope(OP_SESSION_FRAME, id, ts, 42, data)).unwrap(),
            String::from_utf8(server::encode_envelope(
                OP_SESSION_FRAME,
                id,
                ts,
                Some(42),
                &frame
            ))
            .unwrap()
        );
        #[derive(serde::Serialize)]
        struct Data {
            data: String,
        }
        let data_b64 = Data {
            data: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, data),
        };
        assert_eq!(
            executor_output(7, ts, data),
            executor_frame("output", Some(7), ts, data_b64)
        );
    }
}

#[test]
fn input_payload_decodes_base64_bytes() {
    let d = ClientOp::decode(
        r#"{"op":"pty.session_input","id":"a","ts":"2026-01-01T00:00:00Z","payload":{"data":"aGk=","session_id":"s1"}}"#,
    )
    .unwrap();
    assert_eq!(d.envelope.id, "a");
    assert_eq!(d.op, ClientOp::Input(b"hi".to_vec()));
    assert_eq!(d.session_id.as_deref(), Some("s1"));
}

#[test]
fn client_sequence_unknown_fields_and_bad_sizes_are_invalid() {
    for text in [
        r#"{"op":"ping","id":"a","ts":"t","sequence":3,"payload":{"client_ts":"t"}}"#,
        r#"{"op":"ping","id":"a","ts":"t","bogus":1,"payload":{"client_ts":"t"}}"#,
        r#"{"op":"pty.session_resize","id":"a","ts":"t","payload":{"cols":0,"rows":5}}"#,
        r#"{"op":"pty.session_input","id":"a","ts":"t","payload":{"data":"***"}}"#,
        r#"[1,2]"#,
    ] {
        assert!(
            matches!(ClientOp::decode(text), Err((_, DecodeError::Invalid(_)))),
            "{text}"
        );
    }
}

#[test]
fn unknown_op_is_unsupported_and_keeps_the_request_id() {
    let err = ClientOp::decode(r#"{"op":"Nope","id":"x1","ts":"t","payload":{}}"#).unwrap_err();
    assert_eq!(
        err,
        (Some("x1".into()), DecodeError::Unsupported("Nope".into()))
    );
}

#[test]
fn session_frames_round_trip_with_their_kind_tag() {
    let f = SessionFrame::Output {
        stream: OutputStream::Stdout,
        data: Base64Bytes(b"\x1b[1mA".to_vec()),
    };
    let v = serde_json::to_value(&f).unwrap();
    assert_eq!(v["kind"], "Output");
    assert_eq!(v["data"], "G1sxbUE=");
    assert_eq!(serde_json::from_value::<SessionFrame>(v).unwrap(), f);
}
