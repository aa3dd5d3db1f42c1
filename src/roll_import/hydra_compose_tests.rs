use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn defaults_merge_under_the_file_and_interpolations_resolve() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config/envs.yaml",
        "steps_per_traj: 10\nlr: 1.0\nenv:\n  Lake:\n    max_steps: ${steps_per_traj}\n    name: lake-${steps_per_traj}\n",
    );
    let main = write(
        dir.path(),
        "exp/main.yaml",
        "defaults:\n  - ../config/envs@_here_\nlr: 2.0\nenvs:\n  Lake: ${env.Lake}\n",
    );
    let composed = compose(&main).unwrap();
    let tree = &composed.tree;
    assert_eq!(tree.get("lr"), Some(&Value::Float(2.0)));
    assert_eq!(
        tree.at(&["envs", "Lake", "max_steps"]),
        Some(&Value::Int(10))
    );
    assert_eq!(
        tree.at(&["envs", "Lake", "name"]),
        Some(&Value::Str("lake-10".into()))
    );
    assert!(composed.referenced.contains("env.Lake"));
    assert!(composed.referenced.contains("steps_per_traj"));
    // `lr` is the file's own; `env` and `steps_per_traj` come from the defaults file only.
    assert!(!composed.from_defaults.contains_key("lr"));
    assert!(composed.from_defaults["env"].ends_with("config/envs.yaml"));
}

#[test]
fn self_first_lets_defaults_override_and_groups_nest() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.yaml", "a: 1\n");
    write(dir.path(), "opt/adam.yaml", "lr: 3\n");
    let main = write(
        dir.path(),
        "main.yaml",
        "defaults:\n  - _self_\n  - base\n  - opt: adam\na: 0\n",
    );
    let tree = compose(&main).unwrap().tree;
    assert_eq!(tree.get("a"), Some(&Value::Int(1)));
    assert_eq!(tree.at(&["opt", "lr"]), Some(&Value::Int(3)));
}

#[test]
fn bad_references_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let missing = write(dir.path(), "m.yaml", "a:\n  b: ${nope.c}\n");
    let err = compose(&missing).unwrap_err().to_string();
    assert!(
        err.contains("`a.b`") && err.contains("`nope` is missing"),
        "{err}"
    );
    let cycle = write(dir.path(), "c.yaml", "x: ${y}\ny: ${x}\n");
    let err = compose(&cycle).unwrap_err().to_string();
    assert!(err.contains("interpolation cycle"), "{err}");
    let resolver = write(dir.path(), "r.yaml", "x: ${oc.env:HOME}\n");
    let err = compose(&resolver).unwrap_err().to_string();
    assert!(err.contains("resolvers"), "{err}");
    let absent = write(dir.path(), "d.yaml", "defaults:\n  - gone\n");
    let err = compose(&absent).unwrap_err().to_string();
    assert!(
        err.contains("gone.yaml") && err.contains("cannot read"),
        "{err}"
    );
}
