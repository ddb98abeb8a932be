//! The framing and the fingerprints, without a network: frames round-trip, a length over the
//! limit is refused before its body, a stream cut inside a frame is told apart from one that
//! ended between frames, and fingerprints parse in the forms people paste.

use reef_quic::frame::{self, FrameError, MAX_FRAME};
use reef_quic::{ClientFrame, ErrorCode, ServerFrame, fingerprint, parse_fingerprint};

#[tokio::test]
async fn frames_round_trip_and_end_cleanly_between_frames() {
    let hello = ClientFrame::Hello {
        token: "reef_x".into(),
        agent: "ada".into(),
    };
    let message = ClientFrame::Message {
        text: "hi".into(),
        key: None,
    };
    let mut bytes = frame::encode(&hello).unwrap();
    bytes.extend(frame::encode(&message).unwrap());
    let hello_json = serde_json::to_vec(&hello).unwrap();
    assert_eq!(
        bytes[..4],
        u32::try_from(hello_json.len()).unwrap().to_be_bytes()
    );
    assert_eq!(bytes[4..4 + hello_json.len()], hello_json[..]);
    let mut reader = &bytes[..];
    let first: ClientFrame = frame::read_frame(&mut reader).await.unwrap().unwrap();
    let second: ClientFrame = frame::read_frame(&mut reader).await.unwrap().unwrap();
    assert_eq!((first, second), (hello, message));
    let end: Option<ClientFrame> = frame::read_frame(&mut reader).await.unwrap();
    assert_eq!(end, None);
    // The documented JSON, tag and all.
    let text = String::from_utf8(
        frame::encode(&ServerFrame::Error {
            code: ErrorCode::TooLarge,
            message: "m".into(),
        })
        .unwrap()[4..]
            .to_vec(),
    )
    .unwrap();
    assert_eq!(text, r#"{"type":"error","code":"too_large","message":"m"}"#);
}

#[tokio::test]
async fn oversized_truncated_and_malformed_frames_are_refused() {
    let mut over = u32::try_from(MAX_FRAME + 1).unwrap().to_be_bytes().to_vec();
    over.extend([b'x'; 16]);
    let err = frame::read_body(&mut &over[..]).await.unwrap_err();
    assert!(
        matches!(err, FrameError::TooLarge { len } if len == MAX_FRAME + 1),
        "{err}"
    );

    let exactly = vec![b'a'; MAX_FRAME + 10];
    let err = frame::encode(&String::from_utf8(exactly).unwrap()).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");

    for cut in [&[0u8, 0][..], &[0, 0, 0, 9, b'{'][..]] {
        let err = frame::read_body(&mut &cut[..]).await.unwrap_err();
        assert!(matches!(err, FrameError::Truncated), "{err}");
    }
    let mut bad = 3u32.to_be_bytes().to_vec();
    bad.extend(b"{x}");
    let err = frame::read_frame::<_, ClientFrame>(&mut &bad[..])
        .await
        .unwrap_err();
    assert!(matches!(err, FrameError::Json(_)), "{err}");
    let unknown = frame::encode(&serde_json::json!({"type": "launch"})).unwrap();
    let err = frame::read_frame::<_, ClientFrame>(&mut &unknown[..])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("launch"), "{err}");
}

#[test]
fn fingerprints_parse_in_the_forms_people_paste() {
    let printed = fingerprint(b"certificate");
    assert_eq!(printed.len(), 32 * 3 - 1);
    let bytes = parse_fingerprint(&printed).unwrap();
    assert_eq!(parse_fingerprint(&printed.to_lowercase()).unwrap(), bytes);
    assert_eq!(parse_fingerprint(&printed.replace(':', "")).unwrap(), bytes);
    assert_eq!(parse_fingerprint(&format!("  {printed}\n")).unwrap(), bytes);
    let not_hex = format!("G{}", &printed[1..]);
    for bad in ["", "AB:CD", &printed[3..], &not_hex] {
        let err = parse_fingerprint(bad).unwrap_err();
        assert!(err.to_string().contains("64 hex digits"), "{err}");
    }
}
