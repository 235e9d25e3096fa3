//! The worked examples under `spec/examples/` are part of the spec: they lint clean at signoff and,
//! being approved, at validate too (their contract hashes are right).

use crate::env::TestEnv;
use std::path::Path;

#[test]
fn spec_examples_lint_clean_at_signoff_and_validate() {
    let env = TestEnv::initialized();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/examples");
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let entry = entry.unwrap();
        let id = entry.file_name().into_string().unwrap();
        for file in std::fs::read_dir(entry.path()).unwrap() {
            let file = file.unwrap();
            env.write(
                &format!("intent/{id}/{}", file.file_name().to_string_lossy()),
                std::fs::read(file.path()).unwrap(),
            );
        }
        ids.push(id);
    }
    ids.sort();
    assert!(
        ids.len() >= 4,
        "a bug, a feature, a project and its child: {ids:?}"
    );
    let mut types = Vec::new();
    for id in &ids {
        for stage in ["signoff", "validate"] {
            let run = env.iced_json(&["lint", id, "--stage", stage]);
            assert_eq!(
                run.json()["errors"],
                serde_json::json!([]),
                "{id} at {stage}: {run:?}"
            );
            assert_eq!(run.code, 0);
        }
        let status = env.iced_json(&["status", id]).ok().json();
        types.push(status["type"].as_str().unwrap().to_owned());
    }
    for kind in ["bug", "feature", "project"] {
        assert!(
            types.iter().any(|t| t == kind),
            "no {kind} example: {types:?}"
        );
    }
    let rows = env.iced_json(&["list"]).ok().json();
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["type"] == "project"
                && r["children"].as_array().is_some_and(|c| !c.is_empty())),
        "the project example has a child: {rows}"
    );
}
