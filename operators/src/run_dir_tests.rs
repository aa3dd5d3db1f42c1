use super::*;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A run directory whose newest checkpoint (`step_2`) is complete for model `policy`.
fn run_with_checkpoint(dir: &Path, metrics: &[u8]) {
    write(&dir.join("metrics.jsonl"), metrics);
    let ckpt = step_dir(dir, 2);
    for file in ["meta.json", "models/policy/model.bin"] {
        write(&ckpt.join(file), b"x");
    }
    write(&ckpt.join("models/policy/optimizer.bin"), b"x");
    write(&ckpt.join("models/policy/version"), b"2");
}

#[test]
fn an_empty_or_missing_directory_is_ready_for_a_new_run() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(prepare_new_run(dir.path(), false), Ok(None));
    assert_eq!(prepare_new_run(&dir.path().join("new"), false), Ok(None));
    write(&dir.path().join("notes.txt"), b"mine");
    assert_eq!(prepare_new_run(dir.path(), false), Ok(None));
}

#[test]
fn a_run_that_stopped_before_its_first_step_may_be_retried_in_place() {
    // What a run that failed to load its model leaves: the pipeline as run, an empty
    // metrics file and an empty checkpoints folder. Nothing there to lose.
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("pipeline.ron"), b"Pipeline()");
    write(&dir.path().join("metrics.jsonl"), b"");
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    assert_eq!(prepare_new_run(dir.path(), false), Ok(None));
    assert!(dir.path().join("pipeline.ron").exists());
}

#[test]
fn a_directory_holding_a_run_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    write(&out.join("metrics.jsonl"), b"{\"step\":0}\n");
    write(&out.join("checkpoints/step_1/meta.json"), b"{}");
    let err = prepare_new_run(&out, false).unwrap_err();
    let shown = out.display();
    assert_eq!(
        err,
        format!(
            "{shown} already holds a run (metrics.jsonl, checkpoints); a new run there would mix \
             with it. Continue that run with `roll-flow run --resume {shown}`, write this one \
             elsewhere with `--out DIR`, or add `--overwrite` to move the old run aside (to \
             {shown}.previous-<unix time>) and start afresh"
        )
    );
    assert_eq!(
        std::fs::read(out.join("metrics.jsonl")).unwrap(),
        b"{\"step\":0}\n"
    );
}

#[test]
fn overwrite_moves_the_old_run_aside_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    write(&out.join("pipeline.ron"), b"old");
    write(&out.join("metrics.jsonl"), b"{\"step\":0}\n");
    let aside = prepare_new_run(&out, true).unwrap().unwrap();
    assert!(!out.exists());
    assert_eq!(std::fs::read(aside.join("pipeline.ron")).unwrap(), b"old");
    let name = aside.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("run.previous-"), "{name}");
    // A second overwrite keeps both old runs.
    write(&out.join("pipeline.ron"), b"newer");
    write(&out.join("metrics.jsonl"), b"{\"step\":0}\n");
    let second = prepare_new_run(&out, true).unwrap().unwrap();
    assert_ne!(second, aside);
    assert_eq!(
        std::fs::read(second.join("pipeline.ron")).unwrap(),
        b"newer"
    );
    assert_eq!(std::fs::read(aside.join("pipeline.ron")).unwrap(), b"old");
}

#[test]
fn the_aside_name_takes_the_next_free_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let at = |n: &str| dir.path().join(n);
    assert_eq!(aside_path(&out, 1700), Ok(at("run.previous-1700")));
    std::fs::create_dir_all(at("run.previous-1700")).unwrap();
    std::fs::create_dir_all(at("run.previous-1700-2")).unwrap();
    assert_eq!(aside_path(&out, 1700), Ok(at("run.previous-1700-3")));
    assert!(aside_path(Path::new(".."), 1700)
        .unwrap_err()
        .contains("write the run elsewhere with `--out DIR`"));
}

#[test]
fn resume_drops_the_redone_steps_and_unreadable_lines_only() {
    let dir = tempfile::tempdir().unwrap();
    // Steps 0-2 recorded, a bad line in between, the last line torn by a kill.
    let metrics = b"{\"step\":0}\n{\"step\":1}\nnot json\n{\"step\":2}\n{\"step\":3,\"x\"";
    run_with_checkpoint(dir.path(), metrics);
    let resume = prepare_resume(dir.path(), &["policy"]).unwrap();
    assert_eq!(
        resume,
        Resume {
            first_step: 2,
            from_start: false,
            unreadable_lines: vec![3, 5],
            metrics_before: Some(dir.path().join("metrics.jsonl.before-resume-2")),
        }
    );
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
        b"{\"step\":0}\n{\"step\":1}\n"
    );
    // The whole history is kept aside, in case the checkpoint then fails to load.
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl.before-resume-2")).unwrap(),
        metrics
    );
}

#[test]
fn resume_at_the_last_recorded_step_leaves_the_metrics_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    run_with_checkpoint(dir.path(), b"{\"step\":0}\n{\"step\":1}\n");
    let resume = prepare_resume(dir.path(), &["policy"]).unwrap();
    assert_eq!(resume.metrics_before, None);
    assert!(!dir.path().join("metrics.jsonl.before-resume-2").exists());
}

#[test]
fn resume_keeps_a_history_that_is_not_utf8_apart_from_that_line() {
    let dir = tempfile::tempdir().unwrap();
    run_with_checkpoint(dir.path(), b"{\"step\":0}\n{\"step\":1,\"n\":\"\xFF\"}\n");
    let resume = prepare_resume(dir.path(), &["policy"]).unwrap();
    assert_eq!(resume.unreadable_lines, vec![2]);
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
        b"{\"step\":0}\n"
    );
}

#[test]
fn resume_from_an_incomplete_checkpoint_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = b"{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n";
    run_with_checkpoint(dir.path(), metrics);
    std::fs::remove_file(step_dir(dir.path(), 2).join("models/policy/model.bin")).unwrap();
    let err = prepare_resume(dir.path(), &["policy"]).unwrap_err();
    assert!(err.contains("(missing models/policy/model.bin)"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
        metrics
    );
    // A model the pipeline uses but the checkpoint lacks is refused the same way.
    let dir = tempfile::tempdir().unwrap();
    run_with_checkpoint(dir.path(), metrics);
    let err = prepare_resume(dir.path(), &["policy", "critic"]).unwrap_err();
    assert!(err.contains("(missing models/critic)"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
        metrics
    );
}

#[test]
fn resume_without_metrics_leaves_none() {
    let dir = tempfile::tempdir().unwrap();
    run_with_checkpoint(dir.path(), b"");
    std::fs::remove_file(dir.path().join("metrics.jsonl")).unwrap();
    assert_eq!(
        prepare_resume(dir.path(), &["policy"]).unwrap().first_step,
        2
    );
    assert!(!dir.path().join("metrics.jsonl").exists());
}

#[test]
fn resume_before_any_checkpoint_starts_from_step_0_keeping_the_old_metrics_aside() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = b"{\"step\":0}\n{\"step\":1}\n";
    std::fs::write(dir.path().join("metrics.jsonl"), metrics).unwrap();
    let resume = prepare_resume(dir.path(), &["policy"]).unwrap();
    assert_eq!(
        resume,
        Resume {
            first_step: 0,
            from_start: true,
            unreadable_lines: vec![],
            metrics_before: Some(dir.path().join("metrics.jsonl.before-resume-0")),
        }
    );
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
        b""
    );
    assert_eq!(
        std::fs::read(dir.path().join("metrics.jsonl.before-resume-0")).unwrap(),
        metrics
    );
}
