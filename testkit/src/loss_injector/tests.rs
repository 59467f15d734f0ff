use super::*;

/// An RTP header (V=2, PT=111, marker clear) and some payload.
fn rtp(seq: u16) -> Vec<u8> {
    let mut p = vec![0x80, 111];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0; 8]);
    p.extend_from_slice(&[0xAB; 40]);
    p
}

#[test]
fn half_loss_drops_about_half_and_counts_them() {
    let mut inj = LossInjector::new(0.5, 42);
    let dropped = (0..10_000u16).filter(|&s| inj.should_drop(&rtp(s))).count() as u64;
    assert_eq!(inj.rtp_seen(), 10_000);
    assert_eq!(inj.dropped(), dropped);
    assert!((4_700..=5_300).contains(&dropped), "dropped {dropped}");
}

#[test]
fn same_seed_same_pattern() {
    let pattern = |seed| {
        let mut inj = LossInjector::new(0.2, seed);
        (0..500u16)
            .map(|s| inj.should_drop(&rtp(s)))
            .collect::<Vec<_>>()
    };
    assert_eq!(pattern(7), pattern(7));
    assert_ne!(pattern(7), pattern(8));
}

#[test]
fn only_rtp_is_ever_dropped() {
    let mut inj = LossInjector::new(1.0, 1);
    let stun = [
        0x00u8, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let dtls = [22u8, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut rtcp_rr = vec![0x81u8, 201, 0, 7];
    rtcp_rr.extend_from_slice(&[0; 28]);
    let mut rtcp_sr = vec![0x80u8, 200, 0, 6];
    rtcp_sr.extend_from_slice(&[0; 24]);
    for other in [
        &stun[..],
        &dtls[..],
        &rtcp_rr[..],
        &rtcp_sr[..],
        &[0x80u8][..],
    ] {
        assert!(!inj.should_drop(other));
    }
    assert_eq!(inj.rtp_seen(), 0);
    let mut marked = rtp(1);
    marked[1] |= 0x80;
    assert!(inj.should_drop(&marked));
    assert!(inj.should_drop(&rtp(2)));
    assert_eq!(inj.dropped(), 2);
}

#[test]
fn zero_loss_drops_nothing() {
    let mut inj = LossInjector::new(0.0, 3);
    assert!((0..1000u16).all(|s| !inj.should_drop(&rtp(s))));
    assert_eq!((inj.rtp_seen(), inj.dropped()), (1000, 0));
    assert_eq!(LossInjector::new(f64::NAN, 0).fraction(), 0.0);
    assert_eq!(LossInjector::new(7.0, 0).fraction(), 1.0);
}
