//! A bounded record of the most recent items, readable as one contiguous slice.

/// Keeps the last `cap` items pushed. Memory stays under `2 × cap`: when the vector reaches
/// twice the cap the oldest half is shifted out at once, so each push costs O(1) amortised and
/// [`TailBuffer::as_slice`] never needs to copy.
#[derive(Debug, Clone)]
pub struct TailBuffer<T> {
    items: Vec<T>,
    cap: usize,
    total: u64,
}

impl<T> TailBuffer<T> {
    /// Keeps at most `cap` items (0 keeps nothing, but still counts).
    pub fn new(cap: usize) -> Self {
        TailBuffer {
            items: Vec::new(),
            cap,
            total: 0,
        }
    }

    /// Appends one item.
    pub fn push(&mut self, item: T) {
        self.total += 1;
        if self.cap == 0 {
            return;
        }
        if self.items.len() >= 2 * self.cap {
            let excess = self.items.len() - self.cap;
            self.items.drain(..excess);
        }
        self.items.push(item);
    }

    /// The most recent `min(cap, total)` items, oldest first.
    pub fn as_slice(&self) -> &[T] {
        &self.items[self.items.len().saturating_sub(self.cap)..]
    }

    /// Items ever pushed, including those no longer kept.
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl<T: Copy> TailBuffer<T> {
    /// Appends a run of items.
    pub fn extend_from_slice(&mut self, items: &[T]) {
        self.total += items.len() as u64;
        if self.cap == 0 {
            return;
        }
        let items = &items[items.len().saturating_sub(self.cap)..];
        if self.items.len() + items.len() > 2 * self.cap {
            let keep = self.cap - items.len().min(self.cap);
            let excess = self.items.len().saturating_sub(keep);
            self.items.drain(..excess);
        }
        self.items.extend_from_slice(items);
    }
}

#[cfg(test)]
mod tests {
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
}
