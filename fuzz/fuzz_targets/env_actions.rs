//! A model's reply as an action in every built-in env: parsed, answered (a format penalty
//! at worst), never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::envs::EnvConfig;

const ENVS: [&str; 5] = [
    "FrozenLake(size: 4)",
    "Sokoban(dim_room: (6, 6), num_boxes: 1)",
    "Bandit()",
    "Math(operands: 3, max_operand: 20, max_turns: 5)",
    "WebShop(catalog: Generated(products: 200, seed: 0))",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for spec in ENVS {
        let mut env = EnvConfig::parse(spec).unwrap().build().unwrap();
        env.reset(7).unwrap();
        for _ in 0..2 {
            match env.step(&text) {
                Ok(result) if !result.done() => {}
                _ => break,
            }
        }
    }
});
