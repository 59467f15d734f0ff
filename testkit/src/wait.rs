//! Waiting in tests for something another process does: poll a condition until it holds or a
//! time limit passes.

use std::time::{Duration, Instant};

/// Whether `ok` held within `within`, asked every `poll` and once more at the limit (so a
/// condition that became true during the last sleep still counts).
pub fn until(within: Duration, poll: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(poll);
    }
    ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn true_at_once_or_after_some_polls_or_false_at_the_limit() {
        assert!(until(Duration::ZERO, Duration::from_millis(1), || true));
        let mut n = 0;
        assert!(until(
            Duration::from_secs(5),
            Duration::from_millis(1),
            || {
                n += 1;
                n == 3
            }
        ));
        assert_eq!(n, 3);
        let t = Instant::now();
        assert!(!until(
            Duration::from_millis(30),
            Duration::from_millis(5),
            || false
        ));
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
