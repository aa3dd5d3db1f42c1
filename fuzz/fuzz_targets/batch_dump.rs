//! A batch dump file (`--dump-batches`) read back: an error, or a batch every access to
//! which works.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::engine::Batch;

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = serde_json::from_slice::<Batch>(data) else {
        return;
    };
    for i in 0..batch.num_samples() {
        let _ = batch.sample_tokens(i);
    }
    let _ = batch.lengths().sum::<usize>();
    let order = batch.indices_by_length();
    let selected = batch.select(&order);
    assert_eq!(selected.num_tokens(), batch.num_tokens());
    let _ = batch.column_names().count();
});
