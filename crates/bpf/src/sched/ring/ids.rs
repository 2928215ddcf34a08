//! A table of values by stack id, in pages of 256 ids. The kernel hands stack ids out in
//! order, so a window's stacks fill pages densely, and finding or adding one touches its
//! page, not a random bucket of a hash table of millions: that cost two cache misses an
//! insert, a sixth of the drain's time under process churn. A page goes with its last
//! value. It knows nothing of what the values are.

use rustc_hash::FxHashMap as HashMap;

const PAGE_BITS: u32 = 8;
const PAGE: usize = 1 << PAGE_BITS;

struct Page<T> {
    slots: [Option<T>; PAGE],
    live: u16,
}

/// Values by id (see the module documentation).
pub(super) struct IdTable<T> {
    pages: HashMap<u32, Box<Page<T>>>,
}

impl<T> Default for IdTable<T> {
    fn default() -> Self {
        IdTable {
            pages: HashMap::default(),
        }
    }
}

/// The page of `id`, and its slot there.
fn split(id: u32) -> (u32, usize) {
    (id >> PAGE_BITS, id as usize & (PAGE - 1))
}

impl<T> IdTable<T> {
    pub(super) fn get(&self, id: u32) -> Option<&T> {
        let (page, slot) = split(id);
        self.pages.get(&page)?.slots[slot].as_ref()
    }

    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let (page, slot) = split(id);
        self.pages.get_mut(&page)?.slots[slot].as_mut()
    }

    /// The value of `id`, made by `make` when there is none.
    pub(super) fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> T) -> &mut T {
        let (page, slot) = split(id);
        let page = self.pages.entry(page).or_insert_with(|| {
            Box::new(Page {
                slots: [const { None }; PAGE],
                live: 0,
            })
        });
        if page.slots[slot].is_none() {
            page.live += 1;
        }
        page.slots[slot].get_or_insert_with(make)
    }

    pub(super) fn remove(&mut self, id: u32) -> Option<T> {
        let (number, slot) = split(id);
        let page = self.pages.get_mut(&number)?;
        let value = page.slots[slot].take()?;
        page.live -= 1;
        if page.live == 0 {
            self.pages.remove(&number);
        }
        Some(value)
    }

    /// The ids that have a value, in no order.
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages.iter().flat_map(|(&page, p)| {
            p.slots
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_some())
                .map(move |(slot, _)| page << PAGE_BITS | slot as u32)
        })
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.pages
            .values_mut()
            .flat_map(|p| p.slots.iter_mut().flatten())
    }

    /// Values held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pages.values().map(|p| usize::from(p.live)).sum()
    }

    /// Pages held.
    #[cfg(test)]
    fn pages(&self) -> usize {
        self.pages.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_id_and_a_page_goes_with_its_last_value() {
        let mut table = IdTable::default();
        // Ids 0..600 (three pages) and one far away, as a wrapped id would be.
        for id in (0..600).chain([0x7fff_fff0]) {
            assert_eq!(*table.get_or_insert_with(id, || id * 2), id * 2);
        }
        assert_eq!(
            *table.get_or_insert_with(5, || 0),
            10,
            "a value is made once"
        );
        assert_eq!((table.len(), table.pages()), (601, 4));
        assert_eq!(table.get(599), Some(&1198));
        assert_eq!(table.get(600), None);
        *table.get_mut(7).unwrap() += 1;
        assert_eq!(table.get(7), Some(&15));
        // The first page emptied but one value: kept; then that one too: gone.
        for id in 0..255 {
            assert!(table.remove(id).is_some());
        }
        assert_eq!(table.remove(3), None, "removed already");
        assert_eq!((table.len(), table.pages()), (346, 4));
        assert_eq!(table.remove(255), Some(510));
        assert_eq!((table.len(), table.pages()), (345, 3));
        let mut left: Vec<u32> = table.values_mut().map(|v| *v / 2).collect();
        left.sort_unstable();
        assert_eq!(left.len(), 345);
        assert_eq!((left[0], left[343], left[344]), (256, 599, 0x7fff_fff0));
        let mut ids: Vec<u32> = table.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, left);
    }
}
