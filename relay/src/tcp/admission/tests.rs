use super::*;

#[test]
fn the_per_source_cap_counts_an_ipv6_slash_64_as_one_source() {
    let mut a = Admission::new(2, 100);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(a.admit(ip("2001:db8:0:1::1")), Ok(()));
    assert_eq!(a.admit(ip("2001:db8:0:1::ffff")), Ok(()));
    assert_eq!(a.admit(ip("2001:db8:0:1:8::2")), Err(Refusal::PerIpCap));
    assert_eq!(a.admit(ip("2001:db8:0:2::1")), Ok(()), "another /64");
    assert_eq!(a.admit(ip("192.0.2.1")), Ok(()));
    assert_eq!(
        a.admit(ip("::ffff:192.0.2.1")),
        Ok(()),
        "mapped IPv4 is the same source"
    );
    assert_eq!(a.admit(ip("192.0.2.1")), Err(Refusal::PerIpCap));
    a.release(ip("2001:db8:0:1::1"));
    assert_eq!(a.admit(ip("2001:db8:0:1::3")), Ok(()));
    assert_eq!(a.total(), 5);
}

#[test]
fn the_global_cap_holds_and_slots_come_back() {
    let mut a = Admission::new(10, 3);
    for i in 1..=3u8 {
        assert_eq!(a.admit(IpAddr::from([10, 0, 0, i])), Ok(()));
    }
    assert_eq!(
        a.admit(IpAddr::from([10, 0, 0, 4])),
        Err(Refusal::GlobalCap)
    );
    a.release(IpAddr::from([10, 0, 0, 2]));
    a.release(IpAddr::from([10, 0, 0, 9])); // never admitted: ignored
    assert_eq!(a.total(), 2);
    assert_eq!(a.admit(IpAddr::from([10, 0, 0, 4])), Ok(()));
}

#[test]
fn an_ipv6_slash_56_and_slash_48_have_caps_over_their_slash_64s() {
    let limits = SourceLimits {
        per_source: 2,
        per_56: 3,
        per_48: 4,
    };
    let mut a = Admission::with_limits(limits, 100);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(a.admit(ip("2001:db8:0:100::1")), Ok(()));
    assert_eq!(a.admit(ip("2001:db8:0:101::1")), Ok(()));
    assert_eq!(a.admit(ip("2001:db8:0:102::1")), Ok(()));
    assert_eq!(a.admit(ip("2001:db8:0:103::1")), Err(Refusal::Per56Cap));
    assert_eq!(a.admit(ip("2001:db8:0:200::1")), Ok(()), "another /56");
    assert_eq!(a.admit(ip("2001:db8:0:300::1")), Err(Refusal::Per48Cap));
    assert_eq!(a.total(), 4);
    a.release(ip("2001:db8:0:100::1"));
    assert_eq!(a.admit(ip("2001:db8:0:300::1")), Ok(()));
}

#[test]
fn making_room_passes_the_total_but_never_a_sources_cap() {
    let mut a = Admission::new(1, 2);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(a.admit(ip("10.0.0.1")), Ok(()));
    assert_eq!(a.admit(ip("10.0.0.2")), Ok(()));
    assert_eq!(a.admit(ip("10.0.0.3")), Err(Refusal::GlobalCap));
    assert_eq!(a.admit_making_room(ip("10.0.0.3")), Ok(()));
    assert_eq!(a.total(), 3, "until the caller closes one");
    assert_eq!(a.admit_making_room(ip("10.0.0.3")), Err(Refusal::PerIpCap));
}

#[test]
fn a_newcomer_makes_room_past_the_tentative_cap_or_in_a_full_tier_with_tentative_ones() {
    let mut a = Admission::new(10, 4);
    for i in 1..=3u8 {
        assert_eq!(a.admit(IpAddr::from([10, 0, 0, i])), Ok(()));
    }
    assert!(!a.must_make_room(2, 3), "room, and under the tentative cap");
    assert!(a.must_make_room(3, 3), "at the tentative cap");
    assert!(a.must_make_room(4, 100), "the cap is never above the total");
    assert_eq!(a.admit(IpAddr::from([10, 0, 0, 4])), Ok(()));
    assert!(
        a.must_make_room(1, 3),
        "a full tier with a tentative connection"
    );
    assert!(
        !a.must_make_room(0, 3),
        "a full tier of established connections refuses"
    );
}
