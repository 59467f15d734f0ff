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
