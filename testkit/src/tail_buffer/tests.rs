use super::*;

#[test]
fn keeps_the_most_recent_items() {
    let mut b = TailBuffer::new(3);
    for i in 0..10 {
        b.push(i);
        assert!(b.as_slice().len() <= 3);
    }
    assert_eq!(b.as_slice(), &[7, 8, 9]);
    assert_eq!(b.total(), 10);
}

#[test]
fn extend_keeps_the_tail_and_bounds_memory() {
    let mut b = TailBuffer::new(5);
    for chunk in (0..100).collect::<Vec<_>>().chunks(3) {
        b.extend_from_slice(chunk);
        assert!(b.items.len() <= 10);
    }
    assert_eq!(b.as_slice(), &[95, 96, 97, 98, 99]);
    b.extend_from_slice(&(200..220).collect::<Vec<_>>());
    assert_eq!(b.as_slice(), &[215, 216, 217, 218, 219]);
    assert_eq!(b.total(), 120);
}

#[test]
fn zero_cap_only_counts() {
    let mut b = TailBuffer::new(0);
    b.push(1);
    b.extend_from_slice(&[2, 3]);
    assert!(b.as_slice().is_empty());
    assert_eq!(b.total(), 3);
}
