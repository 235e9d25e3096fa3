//! The shape of the code (docs/architecture.md): no two modules import each other in a circle,
//! and no source file is over 1,000 lines. Read from the source text, as a reviewer would: every
//! path a file names (`use` lines and inline `crate::...` or `super::...` paths) is an edge to the
//! module file it lands in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, into `out`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `.rs` file under `src/`, by its module path (`run::stage::receipt`; `run` for
/// `run/mod.rs`; the crate root is `crate`).
fn modules() -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    walk(&src(), &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src()).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = match parts.as_slice() {
                [one] if one == "lib" || one == "main" => "crate".to_owned(),
                _ => parts.join("::"),
            };
            (name, f)
        })
        .collect()
}

/// A test-only file (`*_tests.rs`, `tests.rs`, or one in a `tests/` folder of a module): it may
/// reach into the module it tests.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_stem().unwrap().to_string_lossy();
    let in_tests = path
        .strip_prefix(src())
        .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "tests"));
    name == "tests" || name.ends_with("_tests") || in_tests
}

/// The modules `name` (the file at `path`) refers to.
fn edges(name: &str, path: &Path, known: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    // The module `super` names: the parent of this file's module (for a `mod.rs`, of itself).
    let is_mod_rs = path.file_name().is_some_and(|f| f == "mod.rs");
    let own: Vec<&str> = if name == "crate" {
        Vec::new()
    } else {
        name.split("::").collect()
    };
    let parent: Vec<&str> = if is_mod_rs {
        own.clone()
    } else {
        own[..own.len().saturating_sub(1)].to_vec()
    };
    let mut out = BTreeSet::new();
    // Skip `#[cfg(test)]` modules written inline: everything after the first one.
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
        let mut rest = body;
        while let Some(at) = rest.find(prefix) {
            // Not the tail of a longer path (`foo::super::`).
            let before = &rest[..at];
            rest = &rest[at + prefix.len()..];
            if before.ends_with("::") || before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
            {
                continue;
            }
            let segments: Vec<&str> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            // The longest prefix of base + segments that names a module file.
            let mut full: Vec<&str> = base.clone();
            full.extend(segments);
            for n in (1..=full.len()).rev() {
                let candidate = full[..n].join("::");
                if known.contains_key(&candidate) {
                    if candidate != name {
                        out.insert(candidate);
                    }
                    break;
                }
            }
        }
    }
    // `use` lines of a module's own children (`mod.rs`): `pub use ctx::Ctx`.
    for line in body.lines() {
        if let Some(rest) = line.trim().strip_prefix("pub use ") {
            let first = rest.split("::").next().unwrap_or("");
            let child = if name == "crate" {
                first.to_owned()
            } else {
                format!("{name}::{first}")
            };
            if known.contains_key(&child) && child != name {
                out.insert(child);
            }
        }
    }
    out
}

/// One cycle of the graph, if there is any (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Whether `ancestor` is a module that holds `name` (`run` holds `run::stage::receipt`).
fn holds(ancestor: &str, name: &str) -> bool {
    name.starts_with(&format!("{ancestor}::"))
}

/// The modules and what each uses. A module may use what the modules holding it define (a child
/// is part of its parent: `record::create` using `record`'s helpers is one module talking to
/// itself); every other edge counts.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let known = modules();
    known
        .iter()
        .filter(|(name, path)| !is_test_file(path) && name.as_str() != "crate")
        .map(|(name, path)| {
            let out = edges(name, path, &known)
                .into_iter()
                .filter(|to| !holds(to, name))
                .collect();
            (name.clone(), out)
        })
        .collect()
}

#[test]
fn no_two_modules_import_each_other_in_a_circle() {
    let graph = graph();
    assert!(
        graph
            .get("run::stepper")
            .is_some_and(|e| e.contains("run::under_lock")),
        "the reader of imports works: {:?}",
        graph.get("run::stepper")
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "modules import each other in a circle: {}",
            cycle.join(" -> ")
        );
    }
}

/// The reader finds a circle where there is one (so the test above can fail).
#[test]
fn the_cycle_finder_finds_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_owned()].into());
    g.insert("b".into(), ["c".to_owned()].into());
    g.insert("c".into(), ["a".to_owned()].into());
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.insert("c".into(), BTreeSet::new());
    assert!(find_cycle(&g).is_none());
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    // Every Rust file of the crate, its tests too (src/ and tests/).
    let mut files = Vec::new();
    walk(&src(), &mut files);
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut files,
    );
    assert!(files.len() > 100, "the walk found {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > 1000).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these along their seams: {long:?}");
}

/// Files that may write a lane's stage or a run's status: `decide` chooses every move and
/// `run/records.rs` applies it (`apply_move`, a new attempt, a run's end); `run/control.rs` holds
/// the person's own verbs (pause, resume, discard, release), whose command is the move.
const MAY_MOVE: [&str; 3] = ["run/decide/moves.rs", "run/records.rs", "run/control.rs"];

/// The lines of `text` that choose a move themselves: a stage written (`x.stage = ...`) or a run
/// status named (`status = RunStatus::...`). A status `decide` returned (`run.status = status`,
/// `run.status = decide::waiting_for_a_person()`) is only applied, and passes.
fn own_moves(text: &str) -> Vec<String> {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| {
            let l = l.replace(' ', "");
            (l.contains(".stage=") && !l.contains(".stage=="))
                || (l.contains("status=RunStatus::") && !l.contains("status==RunStatus::"))
        })
        .map(|l| l.trim().to_owned())
        .collect()
}

/// `decide` owns every move (docs/architecture.md): no stage, stepper part or verb outside
/// [`MAY_MOVE`] moves a lane or names a run's status.
#[test]
fn only_decide_chooses_where_a_lane_goes_or_what_a_run_is() {
    let mut found = Vec::new();
    for path in modules().values() {
        let rel = path
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // Test-only files: the decide tables, properties and the simulator model the world.
        if is_test_file(path) || rel.starts_with("run/decide/props") {
            continue;
        }
        if MAY_MOVE.contains(&rel.as_str()) {
            continue;
        }
        for line in own_moves(&std::fs::read_to_string(path).unwrap()) {
            found.push(format!("{rel}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "moves chosen outside decide (return a LaneMove or a status from decide::moves): {found:#?}"
    );
}

/// The reader of moves sees one where there is one (so the test above can fail).
#[test]
fn the_move_reader_finds_a_move() {
    assert_eq!(
        own_moves("l.stage = Stage::Deliver;\nif l.stage == Stage::Land {}\n"),
        ["l.stage = Stage::Deliver;"]
    );
    assert_eq!(
        own_moves("run.status = RunStatus::Blocked;\nrun.status = status;\n"),
        ["run.status = RunStatus::Blocked;"]
    );
    assert!(own_moves("#[cfg(test)]\nl.stage = Stage::Land;").is_empty());
}

/// A module is a file where its path says: no `#[path]` makes a flat file look like a folder's.
#[test]
fn no_module_is_pulled_in_with_a_path_attribute() {
    let pulled: Vec<String> = modules()
        .values()
        .filter(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .any(|l| l.trim_start().starts_with("#[path"))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(pulled.is_empty(), "make these a folder: {pulled:?}");
}
