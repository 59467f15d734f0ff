//! Making a preallocated map resident before traffic needs it (see
//! [`FlowTable::prefault`](super::FlowTable::prefault)).

use std::collections::HashMap;

/// Fills `map` to its capacity with distinct placeholder entries, then clears it (keeping the
/// allocation); returns roughly the bytes of storage this touched.
pub fn prefault_map<K: std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    key: impl Fn(usize) -> K,
    value: impl Fn(usize) -> V,
) -> usize {
    debug_assert!(map.is_empty(), "prefault an empty map only");
    let capacity = map.capacity();
    for i in 0..capacity {
        map.insert(key(i), value(i));
    }
    debug_assert_eq!(map.capacity(), capacity, "prefault must not reallocate");
    map.clear();
    capacity * (std::mem::size_of::<(K, V)>() + 1)
}
