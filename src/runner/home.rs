//! A harness's home (SPEC 20.8): the folder it keeps its sessions, settings and login in, the
//! variable that names it, where the person's own is, and the seeding of a confined agent's home
//! with what its harness logs in with. It reads the person's files and never writes them: a seed
//! is a copy (a link would let the agent write the person's file), written 0600, never through a
//! link, into a home the caller made.

use super::Kind;
use crate::store::StoreError;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The largest login or config file copied.
const SEED_LIMIT: u64 = 1 << 20;
/// The largest `.claude.json` read: Claude Code keeps every project's history in it too.
const CLAUDE_JSON_LIMIT: u64 = 64 << 20;
/// What a `.claude.json` says about the login, of all it holds: a stored key (`/login` with a
/// Console account) and the account a login's tokens belong to.
const CLAUDE_JSON_LOGIN: &[&str] = &["primaryApiKey", "oauthAccount"];

/// The variable by which `kind`'s harness is told its home.
pub fn variable(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Command => None,
        Kind::Claude => Some("CLAUDE_CONFIG_DIR"),
        Kind::Codex => Some("CODEX_HOME"),
        Kind::Pi => Some("PI_CODING_AGENT_DIR"),
    }
}

/// The home `kind`'s harness uses given the variables `vars` (unset or empty is none): the one
/// its variable names, else its default under `HOME`.
pub fn home_of(kind: Kind, vars: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |k: &str| vars(k).filter(|v| !v.is_empty());
    let named = var(variable(kind)?).map(PathBuf::from);
    let default = match kind {
        Kind::Command => return None,
        Kind::Claude => ".claude",
        Kind::Codex => ".codex",
        Kind::Pi => ".pi/agent",
    };
    named.or_else(|| var("HOME").map(|h| Path::new(&h).join(default)))
}

/// Seed `home`, a confined agent's, with copies of the files `kind`'s harness logs in with, from
/// the person's home as `vars` name it (SPEC 20.8). A file the person does not have is left out.
/// Returns the names written.
pub fn seed(
    kind: Kind,
    vars: &dyn Fn(&str) -> Option<String>,
    home: &Path,
) -> Result<Vec<&'static str>, StoreError> {
    let Some(theirs) = home_of(kind, vars) else {
        return Ok(Vec::new());
    };
    let files: &[&'static str] = match kind {
        Kind::Command => &[],
        Kind::Claude => &[".credentials.json"],
        Kind::Codex => &["auth.json", "config.toml"],
        Kind::Pi => &["auth.json", "models.json"],
    };
    let mut written = Vec::new();
    for name in files {
        if let Some(bytes) = read_theirs(&theirs.join(name), SEED_LIMIT)? {
            write_seed(&home.join(name), &bytes)?;
            written.push(*name);
        }
    }
    if kind == Kind::Claude {
        // Beside its folder unless the person named one: `~/.claude.json`.
        let global = match vars("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => Some(PathBuf::from(dir).join(".claude.json")),
            None => vars("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".claude.json")),
        };
        let login = match global {
            Some(path) => read_theirs(&path, CLAUDE_JSON_LIMIT)?.and_then(|b| claude_login(&b)),
            None => None,
        };
        if let Some(login) = login {
            write_seed(&home.join(".claude.json"), &login)?;
            written.push(".claude.json");
        }
    }
    Ok(written)
}

/// A file of the person's, read as iced reads one (a link to a regular file is followed: it is
/// theirs, not an agent's); `None` when they have none.
fn read_theirs(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
    match crate::store::read_limited(path, limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A seed, whole and 0600 whatever was there: a file an agent left at the name (on a launch done
/// again) is replaced, and a link there is refused, never written through.
fn write_seed(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(StoreError::Symlink(path.to_owned()));
    }
    crate::store::remove_if_present(path)?;
    crate::store::write_atomic(path, bytes, 0o600)
}

/// The login part of a `.claude.json`, as a `.claude.json` of its own; `None` when it has none
/// (or is not a JSON object: Claude Code could not read it either).
fn claude_login(bytes: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Object(all)) = serde_json::from_slice::<Value>(bytes) else {
        return None;
    };
    let login: Map<String, Value> = all
        .into_iter()
        .filter(|(k, v)| CLAUDE_JSON_LOGIN.contains(&k.as_str()) && !v.is_null())
        .collect();
    (!login.is_empty()).then(|| {
        let mut text = serde_json::to_vec_pretty(&Value::Object(login)).expect("JSON serialises");
        text.push(b'\n');
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn vars_of(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.display().to_string()))
            .collect();
        move |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn each_harness_is_told_its_home_by_its_own_variable_else_uses_its_default() {
        let none = |_: &str| None;
        assert_eq!(home_of(Kind::Codex, &none), None);
        let home = Path::new("/h");
        let vars = vars_of(&[("HOME", home)]);
        assert_eq!(home_of(Kind::Claude, &vars), Some(home.join(".claude")));
        assert_eq!(home_of(Kind::Codex, &vars), Some(home.join(".codex")));
        assert_eq!(home_of(Kind::Pi, &vars), Some(home.join(".pi/agent")));
        assert_eq!(home_of(Kind::Command, &vars), None);
        let named = vars_of(&[("HOME", home), ("CODEX_HOME", Path::new("/c"))]);
        assert_eq!(home_of(Kind::Codex, &named), Some(PathBuf::from("/c")));
        let empty = |k: &str| (k == "CODEX_HOME").then(String::new).or(Some("/h".into()));
        assert_eq!(home_of(Kind::Codex, &empty), Some(home.join(".codex")));
    }

    /// SPEC 20.8: a confined agent's home holds copies (0600, not links) of what its harness logs
    /// in with, and nothing else of the person's.
    #[test]
    fn a_home_is_seeded_with_copies_of_the_login_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let person = dir.path().join("person");
        let vars = vars_of(&[("HOME", &person)]);
        write(
            &person.join(".claude/.credentials.json"),
            r#"{"claudeAiOauth": {}}"#,
        );
        write(&person.join(".claude/settings.json"), r#"{"hooks": {}}"#);
        write(
            &person.join(".claude.json"),
            r#"{"primaryApiKey": "sk-ant-x", "oauthAccount": {"accountUuid": "u"}, "projects": {"/r": {}}, "userID": "me"}"#,
        );
        write(
            &person.join(".codex/auth.json"),
            r#"{"OPENAI_API_KEY": "k"}"#,
        );
        write(
            &person.join(".codex/config.toml"),
            "model_provider = \"m\"\n",
        );
        write(&person.join(".codex/AGENTS.md"), "be nice\n");
        write(&person.join(".pi/agent/auth.json"), "{}");
        write(&person.join(".pi/agent/models.json"), "{}");
        write(
            &person.join(".pi/agent/settings.json"),
            r#"{"packages": []}"#,
        );
        for (kind, expected) in [
            (Kind::Claude, vec![".claude.json", ".credentials.json"]),
            (Kind::Codex, vec!["auth.json", "config.toml"]),
            (Kind::Pi, vec!["auth.json", "models.json"]),
        ] {
            let home = dir.path().join(kind.as_str());
            std::fs::create_dir(&home).unwrap();
            let mut written = seed(kind, &vars, &home).unwrap();
            written.sort_unstable();
            assert_eq!(written, expected, "{kind:?}");
            let mut there: Vec<String> = std::fs::read_dir(&home)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            there.sort_unstable();
            assert_eq!(there, expected, "{kind:?}: nothing else");
            for name in expected {
                let path = home.join(name);
                assert!(
                    std::fs::symlink_metadata(&path).unwrap().is_file(),
                    "{}",
                    path.display()
                );
                assert_eq!(mode(&path), 0o600, "{}", path.display());
            }
        }
        let login: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("claude/.claude.json")).unwrap())
                .unwrap();
        assert_eq!(
            login,
            serde_json::json!({"primaryApiKey": "sk-ant-x", "oauthAccount": {"accountUuid": "u"}}),
            "only the login part"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("codex/config.toml")).unwrap(),
            "model_provider = \"m\"\n"
        );
    }

    /// A person who names their home (`CLAUDE_CONFIG_DIR`) keeps `.claude.json` in it.
    #[test]
    fn a_named_home_is_where_the_seed_comes_from() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        write(&theirs.join(".credentials.json"), "{}");
        write(&theirs.join(".claude.json"), r#"{"oauthAccount": {}}"#);
        write(
            &dir.path().join("person/.claude.json"),
            r#"{"primaryApiKey": "not this one"}"#,
        );
        let vars = vars_of(&[
            ("HOME", &dir.path().join("person")),
            ("CLAUDE_CONFIG_DIR", &theirs),
        ]);
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let mut written = seed(Kind::Claude, &vars, &home).unwrap();
        written.sort_unstable();
        assert_eq!(written, [".claude.json", ".credentials.json"]);
        assert_eq!(
            std::fs::read_to_string(home.join(".claude.json")).unwrap(),
            "{\n  \"oauthAccount\": {}\n}\n"
        );
        // Nothing to log in with: nothing written, and that is not an error.
        let bare = dir.path().join("bare");
        std::fs::create_dir(&bare).unwrap();
        let nobody = vars_of(&[("HOME", &dir.path().join("nobody"))]);
        assert!(seed(Kind::Pi, &nobody, &bare).unwrap().is_empty());
        // A `.claude.json` with no login in it, or none Claude Code could read, gives none.
        assert_eq!(claude_login(br#"{"projects": {}}"#), None);
        assert_eq!(claude_login(b"not json"), None);
    }

    /// The person's file is read as theirs (a link to a regular file is followed, and the copy is
    /// a file, not the link); a FIFO is refused without waiting on it; a link an agent left in its
    /// home at a seed's name is refused, never written through.
    #[test]
    fn a_seed_is_a_copy_and_never_goes_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let person = dir.path().join("person");
        write(&dir.path().join("vault/auth.json"), "{\"k\": 1}");
        std::fs::create_dir_all(person.join(".codex")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("vault/auth.json"),
            person.join(".codex/auth.json"),
        )
        .unwrap();
        let vars = vars_of(&[("HOME", &person)]);
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        assert_eq!(seed(Kind::Codex, &vars, &home).unwrap(), ["auth.json"]);
        let copy = home.join("auth.json");
        assert!(std::fs::symlink_metadata(&copy).unwrap().is_file());
        std::fs::write(&copy, "changed by the agent").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("vault/auth.json")).unwrap(),
            "{\"k\": 1}",
            "the person's file is not the agent's"
        );

        // A link at a seed's name in the agent's home (an agent's, on a launch done again).
        let target = dir.path().join("target");
        std::fs::write(&target, "the person's").unwrap();
        std::fs::remove_file(&copy).unwrap();
        std::os::unix::fs::symlink(&target, &copy).unwrap();
        assert!(matches!(
            seed(Kind::Codex, &vars, &home),
            Err(StoreError::Symlink(_))
        ));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "the person's");

        // A FIFO where the person's file should be.
        let fifo_home = dir.path().join("fifo-person");
        std::fs::create_dir_all(fifo_home.join(".pi/agent")).unwrap();
        nix::unistd::mkfifo(
            &fifo_home.join(".pi/agent/auth.json"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let fifo_vars = vars_of(&[("HOME", &fifo_home)]);
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        assert!(matches!(
            seed(Kind::Pi, &fifo_vars, &other),
            Err(StoreError::NotRegular { .. })
        ));
    }
}
