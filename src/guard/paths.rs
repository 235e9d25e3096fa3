//! Path classes (SPEC 24.1): what a path is to the guard, decided from its text alone. A path is
//! made absolute against the working directory and its `.` and `..` are folded away; following
//! symbolic links is the caller's job (it reads the disk, this module never does).

use std::path::{Component, Path, PathBuf};

/// What a written path is. Unit-bound classes carry the unit's id (its folder name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    Outside,
    Owned(Owned),
    Config,
    Host,
    Memory,
    Meta,
    Unit(String),
    Decisions(String),
    Aux(String),
    Code,
}

/// Which owned file: each has its own way to be changed, named in the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    Active,
    Metrics,
    Run,
    Evidence,
    Verify,
    /// A folder holding owned files (the root, `.iced`, `intent`, a unit's folder), removed or
    /// moved by a shell command.
    Tree,
}

/// A path as the guard sees it: its class and its root-relative spelling (`/`-separated; the
/// absolute path for `outside`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub class: Class,
    pub rel: String,
}

/// `path` absolute (joined to `cwd` when relative) with `.` and `..` folded; `..` never climbs
/// above `/`.
pub fn normalise(cwd: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The root-relative parts of `abs`, or `None` when it is not under `root` (both normalised).
pub fn relative_parts(root: &Path, abs: &Path) -> Option<Vec<String>> {
    let root = normalise(Path::new("/"), root);
    abs.strip_prefix(&root).ok().map(|rel| {
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    })
}

/// Classify a path given as text (absolute, or relative to `cwd`).
pub fn classify(root: &Path, cwd: &Path, path: &str) -> Target {
    let abs = normalise(&normalise(Path::new("/"), cwd), Path::new(path));
    match relative_parts(root, &abs) {
        None => Target {
            class: Class::Outside,
            rel: abs.display().to_string(),
        },
        Some(parts) => Target {
            class: class_of(&parts),
            rel: parts.join("/"),
        },
    }
}

/// The class of root-relative parts (`[".iced", "active"]`).
pub fn class_of(parts: &[String]) -> Class {
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        [".iced", "active"] => Class::Owned(Owned::Active),
        [".iced", "metrics.jsonl"] => Class::Owned(Owned::Metrics),
        [".iced", "run", ..] => Class::Owned(Owned::Run),
        [".iced", "config.json"] => Class::Config,
        [".iced", "memory", ..] => Class::Memory,
        [".iced", ..] => Class::Meta,
        [".claude", "settings.json" | "settings.local.json"] => Class::Host,
        ["intent"] | ["intent", _] => Class::Meta,
        ["intent", _, "evidence.md"] => Class::Owned(Owned::Evidence),
        ["intent", _, "verify.json"] => Class::Owned(Owned::Verify),
        ["intent", id, "iced.md"] => Class::Unit((*id).to_owned()),
        ["intent", id, "decisions.md"] => Class::Decisions((*id).to_owned()),
        ["intent", id, ..] => Class::Aux((*id).to_owned()),
        _ => Class::Code,
    }
}

/// Whether removing or moving the directory at these parts takes owned files with it: the root,
/// `.iced`, `.iced/run`, `intent` or one unit's folder.
pub fn holds_owned(parts: &[String]) -> bool {
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    matches!(
        p.as_slice(),
        [] | [".iced"] | [".iced", "run"] | ["intent"] | ["intent", _]
    )
}

/// `intent/<id>/iced.md` for a unit id.
pub fn unit_rel(id: &str) -> String {
    format!("intent/{id}/iced.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(path: &str) -> Class {
        classify(Path::new("/r"), Path::new("/r/src"), path).class
    }

    #[test]
    fn every_class_from_its_paths() {
        use Class::*;
        assert_eq!(class("/r/.iced/active"), Owned(super::Owned::Active));
        assert_eq!(
            class("../.iced/metrics.jsonl"),
            Owned(super::Owned::Metrics)
        );
        assert_eq!(class("/r/.iced/run/state.json"), Owned(super::Owned::Run));
        assert_eq!(class("/r/.iced/run"), Owned(super::Owned::Run));
        assert_eq!(
            class("/r/intent/001-a/evidence.md"),
            Owned(super::Owned::Evidence)
        );
        assert_eq!(
            class("/r/intent/001-a/verify.json"),
            Owned(super::Owned::Verify)
        );
        assert_eq!(class("/r/.iced/config.json"), Config);
        assert_eq!(class("/r/.claude/settings.json"), Host);
        assert_eq!(class("/r/.claude/settings.local.json"), Host);
        assert_eq!(class("/r/.claude/commands/x.md"), Code);
        assert_eq!(class("/r/.iced/memory/product.md"), Memory);
        assert_eq!(class("/r/.iced/templates/bug.md"), Meta);
        assert_eq!(class("/r/intent/README.md"), Meta);
        assert_eq!(class("/r/intent/001-a/iced.md"), Unit("001-a".into()));
        assert_eq!(
            class("/r/intent/001-a/decisions.md"),
            Decisions("001-a".into())
        );
        assert_eq!(class("/r/intent/001-a/review.md"), Aux("001-a".into()));
        assert_eq!(class("/r/intent/001-a/x/iced.md"), Aux("001-a".into()));
        assert_eq!(class("main.rs"), Code);
        assert_eq!(class("/elsewhere/x"), Outside);
        assert_eq!(class("/rr/x"), Outside);
    }

    #[test]
    fn dot_dot_is_folded_before_classifying() {
        assert_eq!(
            class("../src/../.iced/./active"),
            Class::Owned(Owned::Active)
        );
        assert_eq!(
            class("../../r/intent/001-a/iced.md"),
            Class::Unit("001-a".into())
        );
        assert_eq!(class("../../x"), Class::Outside);
        let t = classify(Path::new("/r/"), Path::new("/r"), "intent//001-a/iced.md");
        assert_eq!(t.rel, "intent/001-a/iced.md");
    }
}
