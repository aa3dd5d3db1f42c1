//! ROLL env types and env managers roll-flow does not have, each with what playing it
//! would need. An entry ending in `:` is a prefix (a GEM env family).

/// Env types (`custom_envs.<tag>.env_type`).
pub const ENV_TYPES: &[(&str, &str)] = &[
    ("sokoban_sandbox", "Sokoban run inside ROLL's remote sandbox service: it needs that service served over the env-server protocol (docs/ENV_PROTOCOL.md); the same puzzle without the sandbox is `env_type: sokoban`"),
    ("rock_tb_native_env", "terminal and SWE tasks in ROCK sandboxes played by a coding agent: it needs ROCK served over the env-server protocol and tool-calling turns"),
    ("sokoban_native_env", "Sokoban played through native tool calls: it needs tool-call chat turns; the same puzzle with text answers is `env_type: sokoban`"),
    ("sokoban_tool_call", "Sokoban played through tool calls: it needs tool-call chat turns; the same puzzle with text answers is `env_type: sokoban`"),
    ("sokoban_mcp", "Sokoban behind an MCP server: it needs MCP tool calls"),
    ("deepeyes", "a vision-language env (images in the observations): roll-flow's models read text"),
    ("openreward_env", "OpenReward's hosted environments: it needs an OpenReward client served over the env-server protocol"),
    ("atropos_env", "Atropos's environment servers: it needs a bridge from Atropos's API to the env-server protocol"),
    ("roll_math", "ROLL's dataset-backed math env: it needs its dataset (`env_config.dataset_name`) and ROLL's answer checker served over the env-server protocol"),
    ("roll_code", "ROLL's dataset-backed code env: it needs its dataset and a code sandbox served over the env-server protocol"),
    ("roll_qa", "ROLL's dataset-backed QA env: it needs its dataset and ROLL's answer checker served over the env-server protocol"),
    ("math:", "a dataset-backed GEM env: GEM downloads `env_config.dataset_name` from the Hugging Face Hub; it needs that dataset offline and `python -m roll_flow_env.gem ID` as a `Process` env written by hand"),
    ("code:", "a dataset-backed GEM code env: it needs its dataset offline and a code sandbox"),
    ("qa:", "a dataset-backed GEM QA env: it needs its dataset offline (and a search server for the search variants)"),
    ("logic:", "a dataset-backed GEM logic env: it needs its dataset offline"),
];

/// Env managers (`custom_envs.<tag>.env_manager_cls`, matched by class name).
pub const MANAGERS: &[(&str, &str)] = &[
    (
        "VLTrajEnvManager",
        "ROLL's vision-language env manager (images in the prompts): roll-flow's models read text",
    ),
    (
        "AgentNativeStepEnvManager",
        "ROLL's native tool-call env manager: it needs tool-call chat turns",
    ),
    (
        "TirEnvManager",
        "ROLL's tool-integrated-reasoning env manager: it needs tool calls inside a turn",
    ),
];

/// What roll-flow would need for `name` in `table`, if it is listed.
pub fn why_not(table: &[(&str, &'static str)], name: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(listed, _)| match listed.ends_with(':') {
            true => name.starts_with(listed),
            false => name == *listed,
        })
        .map(|(_, why)| *why)
}
