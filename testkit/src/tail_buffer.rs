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
mod tests;
