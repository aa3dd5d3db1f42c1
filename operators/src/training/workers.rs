//! Training on several workers: until gradients are averaged across workers, a pipeline
//! that trains runs on one.

/// Refuses, before a run writes anything, to train (`training_nodes`, the names of the
/// nodes whose kind trains) on more than one worker in total
/// (`-w` threads times `-n` processes): `ActorStep` and `CriticStep` would train diverging
/// copies, as gradients are not averaged across workers. A pipeline that does not train
/// (rollout or eval only) may shard its env groups over any number of workers. The
/// operators check again when built ([`single_worker`]).
pub fn refuse_multi_worker_training<'a>(
    training_nodes: impl IntoIterator<Item = &'a str>,
    workers: usize,
) -> Result<(), String> {
    let training: Vec<String> = training_nodes
        .into_iter()
        .map(|name| format!("`{name}`"))
        .collect();
    if workers <= 1 || training.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{workers} workers asked for (-w times -n), but the pipeline trains ({}): gradient \
         averaging across workers is not implemented; run with `-w 1` (pipelines that only \
         roll out or evaluate may still shard their env groups across workers)",
        training.join(", ")
    ))
}

/// Training over several timely workers needs their gradients averaged; refuse clearly
/// rather than train diverging copies.
pub fn single_worker(kind: &str, peers: usize) -> Result<(), String> {
    if peers > 1 {
        return Err(format!(
            "`{kind}` with {peers} workers: averaging gradients across workers is not implemented yet; run with `-w 1`"
        ));
    }
    Ok(())
}
