use super::*;

#[test]
fn slots_run_out_at_capacity_and_come_back_when_a_guard_drops() {
    let slots = Arc::new(Slots::new(2));
    let mut load = slots.watch();
    let a = slots.try_acquire().expect("first");
    let b = slots.try_acquire().expect("second");
    assert!(slots.try_acquire().is_none(), "full");
    assert_eq!(slots.active(), 2);
    assert!(load.has_changed().unwrap());
    assert_eq!(*load.borrow_and_update(), 2);
    // A refused acquire changes nothing a subscription would report.
    assert!(slots.try_acquire().is_none());
    assert!(!load.has_changed().unwrap());
    drop(a);
    assert_eq!(*load.borrow_and_update(), 1);
    assert!(slots.try_acquire().is_some());
    drop(b);
    assert_eq!(slots.active(), 0);
}
