//! What the shell heuristic knows about programs: which subcommands of a package manager install,
//! which interpreters run code given inline and where that code is, and whether a script writes
//! files.

use super::cluster;
use crate::guard::lex::Word;

/// Package managers' installing subcommands.
pub(super) fn installs(name: &str, args: &[&Word]) -> bool {
    let ops: Vec<&str> = args
        .iter()
        .filter(|a| !a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let sub = ops.first().copied().unwrap_or("");
    let next = ops.get(1).copied().unwrap_or("");
    let any = |list: &[&str]| list.contains(&sub);
    match name {
        "npm" | "pnpm" | "yarn" | "bun" | "cnpm" => {
            (name == "yarn" && sub.is_empty())
                || any(&[
                    "i",
                    "install",
                    "add",
                    "remove",
                    "rm",
                    "uninstall",
                    "un",
                    "unlink",
                    "link",
                    "update",
                    "up",
                    "upgrade",
                    "ci",
                    "dedupe",
                    "prune",
                    "it",
                    "install-test",
                ])
        }
        "pip" | "pip3" | "pipx" => any(&["install", "uninstall"]),
        "uv" => {
            any(&["add", "remove", "sync", "lock"])
                || (sub == "pip" && ["install", "uninstall", "sync"].contains(&next))
        }
        "poetry" | "pdm" => any(&["add", "remove", "install", "update", "lock", "sync"]),
        "cargo" => any(&["add", "remove", "rm", "install", "uninstall", "update"]),
        "go" => any(&["get", "install"]) || (sub == "mod" && ["tidy", "vendor"].contains(&next)),
        "gem" => any(&["install", "uninstall", "update"]),
        "bundle" | "bundler" => any(&["install", "add", "update", "remove"]),
        "composer" => any(&["install", "require", "remove", "update"]),
        "dotnet" => {
            any(&["add", "remove"])
                || (sub == "tool" && ["install", "uninstall", "update"].contains(&next))
        }
        "apt" | "apt-get" | "dnf" | "yum" | "apk" | "brew" | "zypper" => any(&[
            "install",
            "remove",
            "purge",
            "upgrade",
            "add",
            "del",
            "uninstall",
            "reinstall",
        ]),
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Js,
    Python,
    Ruby,
    Perl,
    Php,
    Shell,
    PowerShell,
}

pub(super) enum CodeFlag {
    /// The next word is the code.
    Next,
    /// The code is joined to the flag (`-ecode`, `--eval=code`).
    Joined(String),
    /// Inline, without code to read (`node -r module`).
    NoCode,
}

pub(super) fn interpreter(name: &str) -> Option<Lang> {
    Some(match name {
        "node" | "nodejs" | "bun" | "deno" | "tsx" | "ts-node" => Lang::Js,
        "python" | "python2" | "python3" | "py" | "pypy" | "pypy3" => Lang::Python,
        n if n.starts_with("python3.") => Lang::Python,
        "ruby" => Lang::Ruby,
        "perl" => Lang::Perl,
        "php" => Lang::Php,
        "bash" | "sh" | "zsh" | "dash" | "ksh" | "fish" | "ash" => Lang::Shell,
        "pwsh" | "powershell" | "pwsh.exe" | "powershell.exe" => Lang::PowerShell,
        _ => return None,
    })
}

impl Lang {
    /// Whether this flag gives inline code, and where the code is.
    pub(super) fn code_flag(self, t: &str, w: &Word) -> Option<CodeFlag> {
        let short = |letters: &str| -> Option<CodeFlag> {
            let c = cluster(w)?;
            let at = c.find(|ch| letters.contains(ch))?;
            let rest = &c[at + 1..];
            Some(if rest.is_empty() {
                CodeFlag::Next
            } else {
                CodeFlag::Joined(rest.to_owned())
            })
        };
        match self {
            Lang::Js => match t {
                "-e" | "--eval" | "-p" | "--print" | "eval" => Some(CodeFlag::Next),
                "-r" | "--require" | "--import" | "--loader" => Some(CodeFlag::NoCode),
                _ => t
                    .strip_prefix("--eval=")
                    .or_else(|| t.strip_prefix("--print="))
                    .map(|c| CodeFlag::Joined(c.to_owned())),
            },
            Lang::Python => short("c"),
            Lang::Ruby => short("e"),
            Lang::Perl => short("eE"),
            Lang::Php => short("r"),
            Lang::Shell => {
                let c = cluster(w)?;
                c.contains('c').then_some(CodeFlag::Next)
            }
            Lang::PowerShell => {
                let lower = t.to_ascii_lowercase();
                [
                    "-c",
                    "-command",
                    "-e",
                    "-ec",
                    "-encodedcommand",
                    "-f",
                    "-file",
                ]
                .contains(&lower.as_str())
                .then_some(CodeFlag::NoCode)
            }
        }
    }
}

/// Calls of inline scripts that write, move or remove files.
const WRITERS: &[&str] = &[
    "writeFile",
    "appendFile",
    "createWriteStream",
    "rmSync",
    "rmdirSync",
    "unlink",
    "rename",
    "copyFile",
    "mkdir",
    "truncate",
    "cpSync",
    "symlink",
    "chmod",
    "write_text",
    "write_bytes",
    "rmtree",
    "makedirs",
    "shutil.",
    "os.remove",
    "os.replace",
    "File.write",
    "File.delete",
    "FileUtils",
    "file_put_contents",
    "fwrite",
    "IO.write",
];

pub(super) fn writes_files(code: &str) -> bool {
    if WRITERS.iter().any(|w| code.contains(w)) {
        return true;
    }
    // `open(path, 'w')`, `open(F, ">file")`, `File.open(p, "a")`.
    code.match_indices("open(").any(|(at, _)| {
        let call = &code[at..];
        let call = &call[..call.find(')').unwrap_or(call.len())];
        string_literals(call).iter().enumerate().any(|(i, l)| {
            let mode = i > 0
                && !l.is_empty()
                && l.chars().all(|c| "rwaxbt+".contains(c))
                && l.contains(['w', 'a', 'x', '+']);
            mode || l.starts_with('>') || l.starts_with("+<")
        })
    })
}

/// The contents of every '…' and "…" literal of a script (escapes kept as written).
pub(super) fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if c != '\'' && c != '"' {
            continue;
        }
        let mut lit = String::new();
        let mut escaped = false;
        for d in chars.by_ref() {
            if escaped {
                lit.push(d);
                escaped = false;
            } else if d == '\\' {
                escaped = true;
            } else if d == c {
                break;
            } else {
                lit.push(d);
            }
        }
        out.push(lit);
    }
    out
}
