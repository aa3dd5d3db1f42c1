use super::*;

fn episode() -> EpisodeVars<'static> {
    EpisodeVars {
        instruction: "Reach the goal G.",
        env: "train",
        max_turns: 5,
        actions: Vec::leak(vec!["Left".into(), "Right".into()]),
        sample: 0,
    }
}

fn turn<'a>(observation: &'a str, index: usize, history: Vec<HistoryTurn>) -> TurnVars<'a> {
    TurnVars {
        observation,
        index,
        valid_actions: vec!["Right".into()],
        history,
    }
}

fn past(step: usize, observation: &str, action: &str, reward: f32) -> HistoryTurn {
    HistoryTurn {
        step,
        observation: observation.into(),
        action: action.into(),
        reward: format!("{reward}"),
    }
}

#[test]
fn the_default_trajectory_prompt_is_the_instruction_then_the_bare_observation() {
    let templates = PromptTemplates::default().played(true, false);
    let observation = "_P_\n{{ not a tag }} <b>&\n";
    let system = templates.system(&episode()).unwrap();
    assert_eq!(system.as_deref(), Some("Reach the goal G."));
    let user = templates
        .turn(&episode(), &turn(observation, 0, vec![]))
        .unwrap();
    assert_eq!(user, observation);
}

#[test]
fn without_the_instruction_there_is_no_system_message() {
    let templates = PromptTemplates::default().played(false, false);
    assert_eq!(templates.system(&episode()).unwrap(), None);
}

#[test]
fn the_default_step_prompt_lists_the_last_turns_then_the_current_state() {
    let templates = PromptTemplates::default().played(true, true);
    let history = vec![
        past(2, "S.\n.G", "Right", 0.0),
        past(3, ".S\n.G", "Down", 0.5),
    ];
    let user = templates
        .turn(&episode(), &turn("..\n.S", 3, history))
        .unwrap();
    let expected = "Step 2: state\nS.\n.G\naction: Right\nreward: 0\n\n\
                    Step 3: state\n.S\n.G\naction: Down\nreward: 0.5\n\n\
                    Current state\n..\n.S";
    assert_eq!(user, expected);
    let first = templates
        .turn(&episode(), &turn("S.\n.G", 0, vec![]))
        .unwrap();
    assert_eq!(first, "S.\n.G");
}

#[test]
fn custom_templates_see_every_documented_variable() {
    let spec = PromptSpec {
        system: Some(
            "{{ env }}: {{ instruction }} ({{ max_turns }} turns; {{ actions | join(', ') }}; \
             sample {{ sample }})"
                .into(),
        ),
        turn: Some(
            "Turn {{ turn }}, {{ turns_left }} left (sample {{ sample }}). {{ observation }} \
             Valid: {{ valid_actions | join('|') }}.{% for h in history %} \
             [{{ h.step }} {{ h.observation }} {{ h.action }} {{ h.reward }}]{% endfor %}"
                .into(),
        ),
        reply_start: None,
    };
    let templates = PromptTemplates::try_from(spec).unwrap().played(true, true);
    assert_eq!(
        templates.system(&episode()).unwrap().unwrap(),
        "train: Reach the goal G. (5 turns; Left, Right; sample 0)"
    );
    let user = templates
        .turn(
            &episode(),
            &turn("obs", 1, vec![past(1, "o1", "Left", -0.1)]),
        )
        .unwrap();
    assert_eq!(
        user,
        "Turn 2, 3 left (sample 0). obs Valid: Right. [1 o1 Left -0.1]"
    );
}

#[test]
fn the_samples_of_a_group_can_read_different_examples() {
    // The idea smollm2_frozen_lake_free.ron's template uses: every action as an example
    // answer, the list rotated by the sample's place in its group.
    let spec = PromptSpec {
        system: Some(
            "{% set n = actions | length %}Answer {% for i in range(n) %}\
             <answer>{{ actions[(sample + i) % n] }}</answer>{% endfor %}."
                .into(),
        ),
        turn: None,
        reply_start: None,
    };
    let templates = PromptTemplates::try_from(spec).unwrap().played(true, false);
    let actions = ["Left", "Down", "Right", "Up"].map(String::from);
    let system = |sample| {
        let vars = EpisodeVars {
            actions: &actions,
            sample,
            ..episode()
        };
        templates.system(&vars).unwrap().unwrap()
    };
    let tags = |names: [&str; 4]| names.map(|n| format!("<answer>{n}</answer>")).concat();
    assert_eq!(
        system(0),
        format!("Answer {}.", tags(["Left", "Down", "Right", "Up"]))
    );
    assert_eq!(
        system(1),
        format!("Answer {}.", tags(["Down", "Right", "Up", "Left"]))
    );
    assert_eq!(
        system(6),
        format!("Answer {}.", tags(["Right", "Up", "Left", "Down"]))
    );
}

#[test]
fn a_misspelt_variable_is_an_error_when_compiling_not_at_the_first_rollout() {
    let spec = PromptSpec {
        system: None,
        turn: Some("{{ obsrvation }}".into()),
        reply_start: None,
    };
    let error = PromptTemplates::try_from(spec).unwrap_err();
    assert!(
        error.starts_with("`prompt.turn` line 1: undefined value"),
        "{error}"
    );
}

#[test]
fn a_syntax_error_names_the_template_and_its_line() {
    let spec = PromptSpec {
        system: Some("fine\n{% if %}".into()),
        turn: None,
        reply_start: None,
    };
    let error = PromptTemplates::try_from(spec).unwrap_err();
    assert!(
        error.starts_with("`prompt.system` line 2: syntax error"),
        "{error}"
    );
}

#[test]
fn a_system_template_with_instruction_off_is_refused() {
    let spec = PromptSpec {
        system: Some("{{ instruction }}".into()),
        turn: None,
        reply_start: None,
    };
    let templates = PromptTemplates::try_from(spec).unwrap();
    assert!(templates.check_instruction(true).is_ok());
    let error = templates.check_instruction(false).unwrap_err();
    assert!(error.contains("instruction: false"), "{error}");
}

#[test]
fn a_reply_start_is_read_verbatim_and_empty_by_default() {
    assert_eq!(PromptTemplates::default().reply_start(), "");
    let spec = PromptSpec {
        reply_start: Some("<answer>{{ not a variable }}".into()),
        ..PromptSpec::default()
    };
    let templates = PromptTemplates::try_from(spec).unwrap();
    assert_eq!(templates.reply_start(), "<answer>{{ not a variable }}");
}
