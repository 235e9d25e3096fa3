//! `land.remote` before git is given it (SPEC 24.14). The value reaches git's command line at the
//! admit, the landing, the retire and every remote lane, from a config that needs no trust when it
//! has no runner; so it is checked here, once as the config is read (its shape) and once by every
//! verb of the loop (what the repository's git makes of it). This module never runs the value,
//! and never hands it back in a remedy: a refusal names the key and what is allowed.

use crate::refusal::Refusal;
use std::path::{Path, PathBuf};

/// The schemes a remote URL may have: git's own network transports, and `file`.
const SCHEMES: &[&str] = &["https", "http", "ssh", "git+ssh", "ssh+git", "git", "file"];

/// What a value that passed [`shape`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `<scheme>://...`, of an allowed scheme.
    Url,
    /// `[user@]host:path`: ssh's.
    Scp,
    /// A remote's name, for the repository's git config to know.
    Name,
}

fn refused(step: &str, why: &str) -> Refusal {
    Refusal::new(
        step,
        "remote-refused",
        format!("`land.remote` in `.iced/config.json` {why}; iced gives git no such value"),
        "set `land.remote` to a remote this repository's git config names (`git remote -v` lists them), or to an `https`, `ssh`, `git` or `file` URL outside the checkout; nothing was run",
    )
}

/// The value as text a person reads in a reason: quoted, with its control characters shown.
fn quoted(value: &str) -> String {
    format!("`{}`", value.escape_debug())
}

/// Whether `value` may be handed to git as a remote, by its shape alone (every verb that reads the
/// config, SPEC 11): its kind, or the refusal.
fn shape(value: &str, step: &str) -> Result<Shape, Refusal> {
    let q = quoted(value);
    if value.is_empty() {
        return Err(refused(step, "is empty"));
    }
    if value.starts_with('-') {
        return Err(refused(
            step,
            &format!("is {q}, which git would take for an option"),
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._~:/@%+=,-".contains(c);
    if let Some(c) = value.chars().find(|c| !allowed(*c)) {
        return Err(refused(
            step,
            &format!(
                "is {q}, which holds {}: a remote is a name or a URL, with nothing a shell reads",
                quoted(&c.to_string())
            ),
        ));
    }
    if value.contains("::") {
        return Err(refused(
            step,
            &format!("is {q}, which names a transport of its own (`<transport>::<address>`)"),
        ));
    }
    if let Some((scheme, _)) = value.split_once("://") {
        return if SCHEMES.contains(&scheme) {
            Ok(Shape::Url)
        } else {
            Err(refused(
                step,
                &format!(
                    "is {q}, a URL of scheme `{scheme}`; the schemes allowed are {}",
                    SCHEMES.join(", ")
                ),
            ))
        };
    }
    if value.starts_with(['/', '.', '~']) {
        return Err(refused(
            step,
            &format!("is {q}, a path; a remote on this machine is given as a `file://` URL outside the checkout, or as a remote of the git config"),
        ));
    }
    // git reads `host:path` as ssh's when no `/` comes before the colon.
    match (value.find(':'), value.find('/')) {
        (Some(colon), slash) if slash.is_none_or(|s| colon < s) => Ok(Shape::Scp),
        _ => Ok(Shape::Name),
    }
}

/// What of `land` reaches git's command line, checked as the config is read (every verb, SPEC
/// 11): `land.remote` by its [`shape`], `land.target` as a branch name git cannot take for an
/// option or a range.
pub fn check_landing(land: &super::settings::Landing, step: &str) -> Result<(), Refusal> {
    if let Some(remote) = &land.remote {
        shape(remote, step)?;
    }
    match land.target.as_deref() {
        Some(target) if !is_branch_name(target) => Err(super::settings::invalid(
            step,
            "land.target",
            "must be a branch name (not starting with `-`, with no space, control character, `..` or any of `~^:?*[\\`)",
        )),
        _ => Ok(()),
    }
}

/// A branch name by git's rules for a ref, as far as a command line cares: no option, no range,
/// no revision syntax, nothing a shell or a terminal reads.
fn is_branch_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && name
            .chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !"~^:?*[\\".contains(c))
}

/// What the repository at `root` makes of `value` (a verb of the loop, before anything runs): a
/// name must be a remote its git config knows, and no URL the remote stands for may be a path
/// inside the checkout.
pub fn check_in(root: &Path, value: &str, step: &str) -> Result<(), Refusal> {
    let q = quoted(value);
    let urls = match shape(value, step)? {
        Shape::Name => {
            let fetch =
                crate::git::run(root, &["remote", "get-url", "--", value]).map_err(|_| {
                    refused(
                        step,
                        &format!(
                            "is {q}, which is not a remote this repository's git config knows"
                        ),
                    )
                })?;
            let push =
                crate::git::run(root, &["remote", "get-url", "--push", "--all", "--", value])
                    .unwrap_or_default();
            std::iter::once(fetch)
                .chain(push.lines().map(str::to_owned))
                .collect()
        }
        Shape::Url | Shape::Scp => {
            vec![
                crate::git::run(root, &["ls-remote", "--get-url", "--", value])
                    .unwrap_or_else(|_| value.to_owned()),
            ]
        }
    };
    let inside = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    for url in urls {
        if local_path(root, &url).is_some_and(|p| p.starts_with(&inside)) {
            return Err(refused(
                step,
                &format!("is {q}, a repository inside the checkout, whose own hooks a push or a fetch would run"),
            ));
        }
    }
    Ok(())
}

/// The path on this machine `url` names (resolved against `root`, through links as far as they
/// exist), or None when it names another machine.
fn local_path(root: &Path, url: &str) -> Option<PathBuf> {
    let path = match url.split_once("://") {
        Some(("file", rest)) => rest.strip_prefix("localhost").unwrap_or(rest).to_owned(),
        Some(_) => return None,
        None => {
            let colon = url.find(':');
            let slash = url.find('/');
            if colon.is_some_and(|c| slash.is_none_or(|s| c < s)) {
                return None; // ssh's `host:path`
            }
            url.to_owned()
        }
    };
    Some(super::inside::resolved(&root.join(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for (value, shape_of) in [
            ("origin", Some(Shape::Name)),
            ("up-stream.2", Some(Shape::Name)),
            ("https://example.com/r.git", Some(Shape::Url)),
            ("ssh://git@example.com/r.git", Some(Shape::Url)),
            ("file:///srv/r.git", Some(Shape::Url)),
            ("git@example.com:team/r.git", Some(Shape::Scp)),
            ("--upload-pack=touch x", None),
            ("-uevil", None),
            ("ext::sh -c x", None),
            ("fd::3", None),
            ("gopher://example.com/r", None),
            ("origin;touch x", None),
            ("https://e.com/$(x)", None),
            ("./inside.git", None),
            ("/srv/r.git", None),
            ("~/r.git", None),
            ("", None),
            ("a\nb", None),
        ] {
            assert_eq!(shape(value, "t").ok(), shape_of, "{value:?}");
        }
    }

    #[test]
    fn branch_names() {
        for ok in ["main", "release/2.x", "feature-1"] {
            assert!(is_branch_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-main",
            "--output=x",
            "a..b",
            "main~1",
            "a b",
            "x:y",
            "m\nx",
            "HEAD@{1}",
            "main.lock",
            "/main",
        ] {
            assert!(!is_branch_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_refusal_never_hands_the_value_back_as_a_line_to_run() {
        let r = shape("--upload-pack=touch x", "build").unwrap_err();
        assert_eq!(r.code, "remote-refused");
        assert!(!r.remedy.contains("upload-pack"), "{}", r.remedy);
    }
}
