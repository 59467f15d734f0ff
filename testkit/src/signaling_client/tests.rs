use super::*;

#[test]
fn sessions_url_appends_path_and_query() {
    let u = sessions_url("http://127.0.0.1:8080/", Some("?model=x&lang=en")).unwrap();
    assert_eq!(
        u.as_str(),
        "http://127.0.0.1:8080/v1/sessions?model=x&lang=en"
    );
    let u = sessions_url("http://h:1/prefix", None).unwrap();
    assert_eq!(u.as_str(), "http://h:1/prefix/v1/sessions");
    assert!(sessions_url("not a url", None).is_err());
}

#[test]
fn location_resolves_against_the_request() {
    let req = sessions_url("http://h:1", Some("a=b")).unwrap();
    let res = req.join("/v1/sessions/abc123").unwrap();
    assert_eq!(res.as_str(), "http://h:1/v1/sessions/abc123");
    assert_eq!(res.path_segments().unwrap().next_back(), Some("abc123"));
}

#[test]
fn ufrag_is_read_from_sdp() {
    let sdp = "v=0\r\na=ice-lite\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:Ab+/9x\r\na=ice-pwd:p\r\n";
    assert_eq!(sdp_ice_ufrag(sdp), Some("Ab+/9x"));
    assert_eq!(sdp_ice_ufrag("v=0\r\n"), None);
}

#[test]
fn status_error_exposes_status() {
    let e = SignalingError::Status {
        status: 503,
        body: "no capacity".into(),
    };
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.to_string(), "signaling answered 503: no capacity");
    assert_eq!(SignalingError::MissingLocation.status(), None);
}
