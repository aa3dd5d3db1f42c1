//! Dense weights packed once for a run of products against the same weights (the decode
//! steps of a generation), instead of on every product.
//!
//! A generation loop keeps a [`PackedWeights`] store and runs each decode step inside
//! [`with_packed_weights`]. Within that scope, on that thread, the CPU backend's dense
//! layer with at most 64 rows looks its weight up in the store and, the first time, packs
//! it into column panels ([`cpu::weight_panels`]; a weight stored transposed, the tied
//! output head, from its transpose); every later step reads the panels
//! as they are. Outside a scope, or on other backends, nothing changes. The results are
//! bit-identical either way: the kernel reads the same values in the same order.
//!
//! Why a scope and not a cache on the model: a store entry is only sound while its weight
//! cannot change, and the scope ties it to a loop that holds the model immutably. Each
//! entry keeps a clone of its source tensor (sharing its storage, not copying it), so
//! that storage can neither be freed nor written in place while the entry lives (burn-flex
//! writes in place only into storage nobody else holds), and an entry matches a weight
//! only when both share that storage and its layout. A weight the loop's model no longer
//! uses (a step with another model) is simply not found and packed anew; entries no
//! product of a scope used are dropped when it ends, so a store holds one model's panels.

use std::cell::RefCell;
use std::sync::Arc;

use burn_flex::FlexTensor;

use crate::cpu::weight_panels::WeightPanels;

/// The packed weights of one generation loop; see the module docs.
#[derive(Default, Debug)]
pub struct PackedWeights {
    entries: Vec<Entry>,
    /// Scopes run so far; entries record the last one that used them.
    scopes: u64,
}

#[derive(Debug)]
struct Entry {
    /// The packed weight, sharing its storage.
    source: FlexTensor,
    panels: Arc<WeightPanels>,
    used_in: u64,
}

impl PackedWeights {
    /// An empty store.
    pub fn new() -> PackedWeights {
        PackedWeights::default()
    }

    /// Weights held packed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no weight is held packed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The panels of `weight` (`[k, m]`: its contiguous f32 `values` row-major, or with
    /// `transposed` its transpose's, `[m, k]`), packed now unless an entry holds them.
    fn panels(
        &mut self,
        weight: &FlexTensor,
        values: &[f32],
        transposed: bool,
    ) -> Arc<WeightPanels> {
        let scope = self.scopes;
        let found = self
            .entries
            .iter_mut()
            .find(|e| same_storage(&e.source, weight));
        if let Some(entry) = found {
            entry.used_in = scope;
            return entry.panels.clone();
        }
        let shape = weight.layout().shape();
        let dims = (shape[0], shape[1]);
        let panels = Arc::new(match transposed {
            false => WeightPanels::pack(values, dims),
            true => WeightPanels::pack_transposed(values, dims),
        });
        self.entries.push(Entry {
            source: weight.clone(),
            panels: panels.clone(),
            used_in: scope,
        });
        panels
    }

    /// Drops the entries the scope that just ended did not use, if it used any.
    fn end_scope(&mut self) {
        let scope = self.scopes;
        if self.entries.iter().any(|e| e.used_in == scope) {
            self.entries.retain(|e| e.used_in == scope);
        }
        self.scopes += 1;
    }
}

/// Whether two tensors are views of the same storage with the same layout.
fn same_storage(a: &FlexTensor, b: &FlexTensor) -> bool {
    Arc::ptr_eq(&a.data_arc(), &b.data_arc()) && a.layout() == b.layout()
}

thread_local! {
    /// The store of the innermost [`with_packed_weights`] scope running on this thread.
    static ACTIVE: RefCell<Option<PackedWeights>> = const { RefCell::new(None) };
}

/// Runs `f` with `store` as this thread's packed weights (see the module docs); nested
/// scopes see their own store. The store is updated when `f` returns or unwinds.
pub fn with_packed_weights<T>(store: &mut PackedWeights, f: impl FnOnce() -> T) -> T {
    /// Puts the store back and the enclosing scope's store in place, even on unwinding.
    struct Restore<'a> {
        store: &'a mut PackedWeights,
        outer: Option<PackedWeights>,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let inner =
                ACTIVE.with_borrow_mut(|active| std::mem::replace(active, self.outer.take()));
            *self.store = inner.unwrap_or_default();
            self.store.end_scope();
        }
    }
    let outer = ACTIVE.with_borrow_mut(|active| active.replace(std::mem::take(store)));
    let _restore = Restore { store, outer };
    f()
}

/// The panels of `weight` `[k, m]` from this thread's active store (packing it on first
/// use), or `None` outside a scope. `values` are the weight's contiguous `[k, m]` values,
/// or with `transposed` its transpose's `[m, k]` (a tied head's embedding).
pub(crate) fn active_panels(
    weight: &FlexTensor,
    values: &[f32],
    transposed: bool,
) -> Option<Arc<WeightPanels>> {
    ACTIVE.with_borrow_mut(|active| {
        active
            .as_mut()
            .map(|store| store.panels(weight, values, transposed))
    })
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;

    fn weight(values: Vec<f32>, k: usize, m: usize) -> FlexTensor {
        FlexTensor::from_data(TensorData::new(values, [k, m]))
    }

    fn lookup(w: &FlexTensor) -> Option<Arc<WeightPanels>> {
        active_panels(w, w.as_slice::<f32>().unwrap(), false)
    }

    /// Outside a scope nothing is packed; inside, a weight is packed once and found again
    /// in a later scope; a weight with the same values but its own storage gets its own
    /// entry; a scope that uses only the new weight drops the old one's entry.
    #[test]
    fn entries_follow_the_storage_and_the_last_scope() {
        let a = weight((0..6).map(|v| v as f32).collect(), 2, 3);
        let b = weight((0..6).map(|v| v as f32).collect(), 2, 3);
        assert!(lookup(&a).is_none());
        let mut store = PackedWeights::new();
        let first = with_packed_weights(&mut store, || lookup(&a).unwrap());
        assert_eq!(
            *first,
            WeightPanels::pack(a.as_slice::<f32>().unwrap(), (2, 3))
        );
        assert_eq!(store.len(), 1);
        let again = with_packed_weights(&mut store, || lookup(&a.clone()).unwrap());
        assert!(Arc::ptr_eq(&first, &again), "found, not packed again");
        with_packed_weights(&mut store, || lookup(&b).unwrap());
        assert_eq!(
            store.len(),
            1,
            "a's entry dropped after a scope that used only b"
        );
        with_packed_weights(&mut store, || ());
        assert_eq!(
            store.len(),
            1,
            "a scope without dense layers keeps the entries"
        );
        assert!(lookup(&b).is_none(), "no store outside the scope");
    }

    /// While an entry holds a weight's storage, an in-place write to that weight (burn-flex
    /// writes in place only into unshared storage) copies it first: the entry never goes stale.
    #[test]
    fn a_weight_written_after_packing_is_packed_anew() {
        let mut w = weight(vec![1.0; 4], 2, 2);
        let mut store = PackedWeights::new();
        with_packed_weights(&mut store, || lookup(&w).unwrap());
        assert!(
            w.try_storage_mut::<f32>().is_none(),
            "shared with the entry"
        );
        w.storage_mut::<f32>()[0] = 5.0;
        let panels = with_packed_weights(&mut store, || lookup(&w).unwrap());
        assert_eq!(panels.values()[0], 5.0);
        assert_eq!(panels.values()[1], 1.0);
    }

    /// A panic inside the scope leaves no store active and the caller's store usable.
    #[test]
    fn a_panicking_scope_restores_the_thread() {
        let w = weight(vec![1.0; 4], 2, 2);
        let mut store = PackedWeights::new();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_packed_weights(&mut store, || {
                lookup(&w);
                panic!("inside");
            })
        }));
        assert!(result.is_err());
        assert!(lookup(&w).is_none());
        assert_eq!(store.len(), 1);
    }
}
