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
    let resolver = write(dir.path(), "r.yaml", "x: ${oc.decode:'1'}\n");
    let err = compose(&resolver).unwrap_err().to_string();
    assert!(
        err.contains("`x`") && err.contains("`oc.decode` is not one the importer evaluates"),
        "{err}"
    );
    let relative = write(dir.path(), "rel.yaml", "a:\n  b: 1\n  c: ${.b}\n");
    let err = compose(&relative).unwrap_err().to_string();
    assert!(err.contains("relative interpolations"), "{err}");
}

#[test]
fn resolvers_become_stated_constants() {
    let dir = tempfile::tempdir().unwrap();
    let main = write(
        dir.path(),
        "m.yaml",
        "exp_name: demo\nmodel_name: ${exp_name}-${now:%Y%m%d_%H%M%S}\nkey: ${oc.env:HOME}\n\
         dir: ${oc.env:MODELS_DIR,/opt/models}\npicked: ${oc.select:exp_name,x}\nfallback: ${oc.select:nope,7}\n",
    );
    let composed = compose(&main).unwrap();
    let tree = &composed.tree;
    let text = |k: &str| tree.get(k).unwrap().to_string();
    assert_eq!(text("model_name"), "demo-19700101_000000");
    assert_eq!(text("key"), "", "the environment is not read");
    assert_eq!(text("dir"), "/opt/models");
    assert_eq!(
        (text("picked"), text("fallback")),
        ("demo".into(), "7".into())
    );
    let keys: Vec<(&str, &str)> = composed
        .resolutions
        .iter()
        .map(|r| (r.key.as_str(), r.expression.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("model_name", "${now:%Y%m%d_%H%M%S}"),
            ("key", "${oc.env:HOME}"),
            ("dir", "${oc.env:MODELS_DIR,/opt/models}"),
        ]
    );
}

#[test]
fn a_missing_defaults_file_is_recorded_unless_a_key_from_it_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let absent = write(
        dir.path(),
        "d.yaml",
        "defaults:\n  - ../config/gone@_here_\na: 1\n",
    );
    let composed = compose(&absent).unwrap();
    assert_eq!(composed.tree.get("a"), Some(&Value::Int(1)));
    assert_eq!(composed.missing_defaults.len(), 1);
    assert_eq!(composed.missing_defaults[0].0, "../config/gone@_here_");
    assert!(composed.missing_defaults[0].1.ends_with("config/gone.yaml"));
    let needed = write(
        dir.path(),
        "n.yaml",
        "defaults:\n  - ../config/gone@_here_\nenvs:\n  Lake: ${custom_env.Lake}\n",
    );
    let err = compose(&needed).unwrap_err().to_string();
    assert!(
        err.contains("`envs.Lake`")
            && err.contains("`custom_env` is missing")
            && err.contains("the defaults entry `../config/gone@_here_` may supply it")
            && err.contains("gone.yaml"),
        "{err}"
    );
}
