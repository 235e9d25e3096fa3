//! The shell heuristic (SPEC 24.1): which paths a command writes, whether it mutates the
//! repository, and whether it runs inline code. A heuristic, not a sandbox: the receipt is the
//! check that holds. Pure: paths are resolved by their text against the directory the command is
//! in (following `cd`, `pushd`, subshells and `git -C`), never against the disk.
//!
//! Where a path's value cannot be known: a path that starts with an expansion (`$ROOT/…`, `~/…`)
//! is taken as relative to the root, so that `"$ROOT/.iced/active"` still names an owned file; a
//! word that is only an expansion (`"$f"`) names nothing the guard can check, and a mutation of it
//! counts as inside the root; a glob stands for every path it could match.

mod globs;
mod programs;

pub use globs::candidates;

use super::lex::{self, Op, Redir, Tok, Word, EXPANDED};
use super::paths::{normalise, relative_parts};
use programs::{installs, interpreter, string_literals, writes_files, CodeFlag, Lang};
use std::path::{Path, PathBuf};

/// What a command does, as far as its text says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Paths under the root the command writes (redirection targets, operands of file-writing
    /// commands, destinations, in-place edits, literals of a writing inline script).
    pub writes: Vec<Written>,
    /// It changes files or repository state somewhere (SPEC 24.1's list).
    pub mutating: bool,
    /// One of its mutations is inside the root, or cannot be placed.
    pub mutates_inside: bool,
    /// It runs code given inline (`node -e`, `python -c`, `bash -c`, `eval`, a heredoc script).
    pub inline_code: bool,
}

/// One written path, root-relative; a part may hold glob or expansion sentinels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub parts: Vec<String>,
    /// Removed or moved away (`rm`, `mv`'s sources, `git rm`): a folder takes what it holds.
    pub destructive: bool,
}

/// Nested `bash -c`, `eval` and substitutions deeper than this count as an unknown mutation.
const MAX_DEPTH: u8 = 6;

pub fn analyse(root: &Path, cwd: &Path, command: &str) -> Facts {
    let mut walker = Walker {
        root: normalise(Path::new("/"), root),
        facts: Facts::default(),
        depth: 0,
    };
    let cwd = normalise(Path::new("/"), cwd);
    walker.text(Some(cwd), command);
    walker.facts
}

/// Where a path word points.
enum Place {
    Outside,
    /// Root-relative parts (possibly with sentinels).
    Inside(Vec<String>),
    /// Cannot be placed: counts as inside for mutations, names nothing for writes.
    Unknown,
}

struct Walker {
    root: PathBuf,
    facts: Facts,
    depth: u8,
}

/// One simple command between control operators.
struct Simple<'t> {
    words: Vec<&'t Word>,
    redirs: Vec<&'t Redir>,
    before: Option<Op>,
    after: Option<Op>,
}

fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

fn is_flag(w: &Word) -> bool {
    w.text.starts_with('-') && w.text.len() > 1
}

/// A short-option cluster (`-pi`, `-lc`): its letters; `None` for a long option or an operand.
pub(super) fn cluster(w: &Word) -> Option<&str> {
    w.text
        .strip_prefix('-')
        .filter(|rest| !rest.is_empty() && !rest.starts_with('-'))
}

/// Operands after the flags: `--` ends the flags; the flags in `with_arg` take the next word.
fn operands<'w>(args: &[&'w Word], with_arg: &[&str]) -> Vec<&'w Word> {
    let mut out = Vec::new();
    let mut flags_done = false;
    let mut i = 0;
    while i < args.len() {
        let w = args[i];
        i += 1;
        if flags_done || !is_flag(w) {
            out.push(w);
        } else if w.text == "--" {
            flags_done = true;
        } else if with_arg.contains(&w.text.as_str()) {
            i += 1;
        }
    }
    out
}

fn literal(text: &str) -> Word {
    Word {
        text: text.to_owned(),
        raw: text.to_owned(),
    }
}

fn unknown_word() -> Word {
    Word {
        text: EXPANDED.to_string(),
        raw: "$?".into(),
    }
}

const TEMP_PREFIXES: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/private/tmp/",
    "$TMPDIR",
    "${TMPDIR",
    "\"$TMPDIR",
    "\"${TMPDIR",
    "$TMP/",
    "${TMP}",
    "$TEMP/",
    "${TEMP}",
];

/// A discard or terminal device: writing it changes no file.
fn is_device(text: &str) -> bool {
    matches!(
        text,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || text.starts_with("/dev/fd/")
}

impl Walker {
    fn text(&mut self, cwd: Option<PathBuf>, command: &str) {
        if self.depth >= MAX_DEPTH {
            self.mutation(true);
            return;
        }
        self.depth += 1;
        let lexed = lex::lex(command);
        for sub in &lexed.substitutions {
            self.text(cwd.clone(), sub);
        }
        self.tokens(cwd, &lexed.toks);
        self.depth -= 1;
    }

    fn mutation(&mut self, inside: bool) {
        self.facts.mutating = true;
        self.facts.mutates_inside |= inside;
    }

    fn dir_inside(&self, dir: &Option<PathBuf>) -> bool {
        dir.as_ref()
            .is_none_or(|d| relative_parts(&self.root, d).is_some())
    }

    fn place(&self, dir: &Option<PathBuf>, w: &Word) -> Place {
        let raw = w.raw.trim_start_matches(['"', '\'']);
        if TEMP_PREFIXES.iter().any(|p| raw.starts_with(p)) && !w.text.starts_with('/') {
            // `$TMPDIR/x`: a temp location, wherever it is.
            return Place::Outside;
        }
        if w.text.is_empty() || w.text.chars().all(|c| c == EXPANDED) {
            return Place::Unknown;
        }
        if let Some(rest) = w.text.strip_prefix(EXPANDED) {
            if rest.is_empty() || rest.starts_with('/') || rest.starts_with(EXPANDED) {
                let parts: Vec<String> = rest
                    .split('/')
                    .filter(|p| !p.is_empty() && *p != ".")
                    .map(str::to_owned)
                    .collect();
                return Place::Inside(parts);
            }
            return Place::Unknown;
        }
        let path = Path::new(&w.text);
        let abs = match dir {
            _ if path.is_absolute() => normalise(Path::new("/"), path),
            Some(d) => normalise(d, path),
            None => return Place::Unknown,
        };
        match relative_parts(&self.root, &abs) {
            Some(parts) => Place::Inside(parts),
            None => Place::Outside,
        }
    }

    /// Record a written path; whether it is inside the root (or cannot be placed).
    fn write(&mut self, dir: &Option<PathBuf>, w: &Word, destructive: bool) -> bool {
        match self.place(dir, w) {
            Place::Outside => false,
            Place::Unknown => true,
            Place::Inside(parts) => {
                self.facts.writes.push(Written { parts, destructive });
                true
            }
        }
    }

    /// A mutation of these targets: inside when any is, or when there are none and the command
    /// works in a directory inside the root.
    fn write_all(&mut self, dir: &Option<PathBuf>, targets: &[Word], destructive: bool) {
        let mut inside = targets.is_empty() && self.dir_inside(dir);
        for t in targets {
            inside |= self.write(dir, t, destructive);
        }
        self.mutation(inside);
    }

    fn tokens(&mut self, cwd: Option<PathBuf>, toks: &[Tok]) {
        let mut dir = cwd;
        let mut pushed: Vec<Option<PathBuf>> = Vec::new();
        let mut subshells: Vec<Option<PathBuf>> = Vec::new();
        // After `cd X || …`: the next command runs only if the cd failed, in the old directory.
        let mut failed_cd: Option<Option<PathBuf>> = None;
        let mut current = Simple {
            words: Vec::new(),
            redirs: Vec::new(),
            before: None,
            after: None,
        };
        let mut iter = toks.iter().peekable();
        loop {
            let tok = iter.next();
            match tok {
                Some(Tok::Word(w)) => {
                    current.words.push(w);
                    continue;
                }
                Some(Tok::Redir(r)) => {
                    current.redirs.push(r);
                    continue;
                }
                Some(Tok::Op(op)) => current.after = Some(*op),
                None => {}
            }
            let before = current.after;
            let simple = std::mem::replace(
                &mut current,
                Simple {
                    words: Vec::new(),
                    redirs: Vec::new(),
                    before,
                    after: None,
                },
            );
            self.step(simple, &mut dir, &mut pushed, &mut failed_cd);
            match tok {
                Some(Tok::Op(Op::Open)) => subshells.push(dir.clone()),
                Some(Tok::Op(Op::Close)) => dir = subshells.pop().unwrap_or(None),
                None => break,
                _ => {}
            }
        }
    }

    fn step(
        &mut self,
        s: Simple<'_>,
        dir: &mut Option<PathBuf>,
        pushed: &mut Vec<Option<PathBuf>>,
        failed_cd: &mut Option<Option<PathBuf>>,
    ) {
        if s.words.is_empty() && s.redirs.is_empty() {
            return;
        }
        let mut run_dir = dir.clone();
        let mut ambiguous = false;
        if let Some(before_cd) = failed_cd.take() {
            let first = s.words.first().map(|w| w.text.as_str());
            if matches!(first, Some("exit" | "return" | "false" | "die")) {
                return;
            }
            // Whether the cd happened is unknown from here on.
            run_dir = before_cd;
            *dir = None;
            ambiguous = true;
        }
        let in_pipe = s.before == Some(Op::Pipe) || s.after == Some(Op::Pipe);
        let words = strip_prefixes(&s.words);
        let name = words.first().map(|w| basename(&w.text)).unwrap_or("");
        match name {
            "cd" | "chdir" | "pushd" if !in_pipe => {
                let target = words.get(1).filter(|w| w.text != "-" && !is_flag(w));
                let next = match target {
                    Some(w) if w.is_literal() => {
                        run_dir.as_ref().map(|d| normalise(d, Path::new(&w.text)))
                    }
                    _ => None,
                };
                if name == "pushd" {
                    pushed.push(run_dir.clone());
                }
                if s.after == Some(Op::Or) {
                    *failed_cd = Some(run_dir.clone());
                }
                if !ambiguous {
                    *dir = next;
                }
            }
            "popd" if !in_pipe => *dir = pushed.pop().unwrap_or(None),
            _ => {
                let piped = s.before == Some(Op::Pipe);
                self.simple(&run_dir, &words, &s.redirs, piped);
            }
        }
    }

    fn simple(&mut self, dir: &Option<PathBuf>, words: &[&Word], redirs: &[&Redir], piped: bool) {
        let mut stdin_body: Option<&str> = None;
        for r in redirs {
            match r {
                Redir::Out { fd, target } => self.redirect(dir, *fd, target),
                Redir::Input { body } => stdin_body = Some(body),
                Redir::Other => {}
            }
        }
        let Some(first) = words.first() else { return };
        if !first.is_literal() {
            return;
        }
        let name = basename(&first.text);
        let args = &words[1..];
        match name {
            "rm" | "rmdir" | "unlink" | "shred" => {
                let targets = owned(operands(args, &[]));
                self.write_all(dir, &targets, true);
            }
            "mkdir" => self.write_all(dir, &owned(operands(args, &["-m"])), false),
            "touch" => self.write_all(dir, &owned(operands(args, &["-d", "-t", "-r"])), false),
            "truncate" => self.write_all(dir, &owned(operands(args, &["-s", "-r"])), false),
            "tee" => self.write_all(dir, &owned(operands(args, &[])), false),
            "chmod" | "chown" | "chgrp" => {
                let ops = operands(args, &[]);
                // The first operand is the mode or the owner (`chmod -x f` spells it as a flag).
                let skip = usize::from(!args.iter().any(|a| a.text.starts_with("--reference")));
                let mode_as_flag = name == "chmod"
                    && args.iter().any(|a| {
                        cluster(a).is_some_and(|c| c.chars().all(|c| "rwxXst".contains(c)))
                    });
                let targets = owned(
                    ops.into_iter()
                        .skip(if mode_as_flag { 0 } else { skip })
                        .collect(),
                );
                self.write_all(dir, &targets, false);
            }
            "cp" | "install" | "rsync" | "scp" => {
                let targets = destinations(args, &["-S", "-m", "-o", "-g", "-e"]);
                self.write_all(dir, &targets, false);
            }
            "ln" => {
                let ops = operands(args, &["-S", "-t"]);
                let targets = if ops.len() == 1 && !args.iter().any(|a| a.text == "-t") {
                    vec![literal(basename(&ops[0].text))]
                } else {
                    destinations(args, &["-S"])
                };
                self.write_all(dir, &targets, false);
            }
            "mv" => {
                let targets = destinations(args, &["-S"]);
                let mut sources = owned(operands(args, &["-S", "-t"]));
                let to_dir = args
                    .iter()
                    .any(|a| a.text == "-t" || a.text.starts_with("--target-directory="));
                if !to_dir {
                    sources.pop();
                }
                for s in &sources {
                    self.write(dir, s, true);
                }
                self.write_all(dir, &targets, false);
            }
            "dd" => {
                let targets: Vec<Word> = args
                    .iter()
                    .filter_map(|a| {
                        a.text.strip_prefix("of=").map(|p| Word {
                            text: p.to_owned(),
                            raw: a.raw[3.min(a.raw.len())..].to_owned(),
                        })
                    })
                    .collect();
                if !targets.is_empty() {
                    self.write_all(dir, &targets, false);
                }
            }
            "patch" => self.write_all(dir, &[], false),
            "sed" => self.sed(dir, args),
            "perl" => self.perl(dir, args, stdin_body, piped),
            "find" => self.find(dir, args),
            "xargs" => self.xargs(dir, args),
            "git" => self.git(dir, args),
            "curl" | "wget" => self.download(dir, name, args),
            "tar" | "unzip" => self.unpack(dir, name, args),
            "eval" => {
                self.facts.inline_code = true;
                let code: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
                self.text(dir.clone(), &code.join(" "));
            }
            _ if installs(name, args) => {
                let inside = self.dir_inside(dir);
                self.mutation(inside);
            }
            _ => {
                if let Some(lang) = interpreter(name) {
                    self.interpreter(dir, lang, args, stdin_body, piped);
                }
            }
        }
    }

    fn redirect(&mut self, dir: &Option<PathBuf>, fd: Option<u32>, target: &Word) {
        if is_device(&target.text) {
            return;
        }
        let inside = self.write(dir, target, false);
        // Diagnostics only (`2>err.log`) and scratch files in a temp location are not changes
        // of the repository.
        let raw = target.raw.trim_start_matches(['"', '\'']);
        let temp = !inside && TEMP_PREFIXES.iter().any(|p| raw.starts_with(p));
        if fd == Some(2) || temp {
            return;
        }
        self.mutation(inside);
    }

    fn sed(&mut self, dir: &Option<PathBuf>, args: &[&Word]) {
        let in_place = args.iter().any(|a| {
            a.text.starts_with("--in-place") || cluster(a).is_some_and(|c| c.contains('i'))
        });
        if !in_place {
            return;
        }
        let with_script = args.iter().any(|a| {
            matches!(a.text.as_str(), "-e" | "-f")
                || a.text.starts_with("--expression")
                || a.text.starts_with("--file")
        });
        let ops = operands(args, &["-e", "-f", "-l", "--expression", "--file"]);
        let files = owned(ops.into_iter().skip(usize::from(!with_script)).collect());
        self.write_all(dir, &files, false);
    }

    fn perl(&mut self, dir: &Option<PathBuf>, args: &[&Word], stdin: Option<&str>, piped: bool) {
        let in_place = args
            .iter()
            .take_while(|a| is_flag(a))
            .any(|a| cluster(a).is_some_and(|c| c.split('e').next().unwrap_or("").contains('i')));
        if in_place {
            let has_code = args
                .iter()
                .any(|a| cluster(a).is_some_and(|c| c.contains('e') || c.contains('E')));
            let ops = operands(args, &["-e", "-E", "-M", "-I"]);
            let files = owned(ops.into_iter().skip(usize::from(!has_code)).collect());
            self.write_all(dir, &files, false);
        }
        self.interpreter(dir, Lang::Perl, args, stdin, piped);
    }

    fn find(&mut self, dir: &Option<PathBuf>, args: &[&Word]) {
        let starts: Vec<Word> = args
            .iter()
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .map(|w| (*w).clone())
            .collect();
        let mut inside = starts.is_empty() && self.dir_inside(dir);
        for s in &starts {
            inside |= !matches!(self.place(dir, s), Place::Outside);
        }
        if args.iter().any(|a| a.text == "-delete") {
            self.mutation(inside);
        }
        let mut i = 0;
        while i < args.len() {
            if matches!(
                args[i].text.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir"
            ) {
                let end = args[i + 1..]
                    .iter()
                    .position(|a| a.text == ";" || a.text == "+")
                    .map_or(args.len(), |p| i + 1 + p);
                let unknown = unknown_word();
                let inner: Vec<&Word> = args[i + 1..end]
                    .iter()
                    .map(|w| if w.text == "{}" { &unknown } else { *w })
                    .collect();
                let before = self.facts.mutating;
                self.facts.mutating = false;
                self.simple(dir, &inner, &[], false);
                if self.facts.mutating {
                    self.mutation(inside);
                }
                self.facts.mutating |= before;
                i = end;
            }
            i += 1;
        }
    }

    fn xargs(&mut self, dir: &Option<PathBuf>, args: &[&Word]) {
        let mut i = 0;
        while i < args.len() && is_flag(args[i]) {
            let takes = matches!(
                args[i].text.as_str(),
                "-I" | "-n" | "-P" | "-L" | "-d" | "-E" | "-s" | "-a"
            );
            i += if takes { 2 } else { 1 };
        }
        let unknown = unknown_word();
        let mut inner: Vec<&Word> = args[i.min(args.len())..].to_vec();
        if inner.is_empty() {
            return;
        }
        if matches!(
            basename(&inner[0].text),
            "rm" | "mv" | "cp" | "tee" | "ln" | "sh" | "bash"
        ) {
            self.facts.inline_code = true;
        }
        inner.push(&unknown);
        self.simple(dir, &inner, &[], false);
    }

    fn git(&mut self, dir: &Option<PathBuf>, args: &[&Word]) {
        let mut gdir = dir.clone();
        let mut i = 0;
        while i < args.len() {
            let t = args[i].text.as_str();
            match t {
                "-C" => {
                    gdir = match (args.get(i + 1), &gdir) {
                        (Some(w), Some(d)) if w.is_literal() => {
                            Some(normalise(d, Path::new(&w.text)))
                        }
                        _ => None,
                    };
                    i += 2;
                }
                "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
                _ if t.starts_with('-') => i += 1,
                _ => break,
            }
        }
        let Some(sub) = args.get(i).map(|w| w.text.as_str()) else {
            return;
        };
        let rest = &args[(i + 1).min(args.len())..];
        let inside = self.dir_inside(&gdir);
        match sub {
            "rm" | "mv" => {
                for w in operands(rest, &[]) {
                    self.write(&gdir, w, true);
                }
                self.mutation(inside);
            }
            "checkout" | "restore" | "reset" => {
                for w in operands(rest, &["-s", "--source", "-b", "-B", "--orphan"]) {
                    self.write(&gdir, w, false);
                }
                self.mutation(inside);
            }
            "switch" | "merge" | "rebase" | "clean" | "apply" | "am" | "cherry-pick" | "revert"
            | "pull" => self.mutation(inside),
            "stash" if !matches!(rest.first().map(|w| w.text.as_str()), Some("list" | "show")) => {
                self.mutation(inside)
            }
            "push" => {
                let forced = rest.iter().any(|w| {
                    let t = w.text.as_str();
                    matches!(
                        t,
                        "--force" | "--delete" | "--mirror" | "--prune" | "--force-if-includes"
                    ) || t.starts_with("--force-with-lease")
                        || cluster(w).is_some_and(|c| c.contains('f') || c.contains('d'))
                        || (!t.starts_with('-') && (t.starts_with('+') || t.starts_with(':')))
                });
                if forced {
                    self.mutation(inside);
                }
            }
            _ => {}
        }
    }

    fn download(&mut self, dir: &Option<PathBuf>, name: &str, args: &[&Word]) {
        let out_flags: &[&str] = if name == "curl" {
            &["-o", "--output"]
        } else {
            &["-O", "--output-document"]
        };
        let mut targets = Vec::new();
        let mut writes = name == "wget";
        for (i, a) in args.iter().enumerate() {
            // `-o FILE`, also at the end of a cluster (`-sSo FILE`).
            let names_output = out_flags.contains(&a.text.as_str())
                || cluster(a).is_some_and(|c| c.ends_with(if name == "curl" { 'o' } else { 'O' }));
            if names_output {
                if let Some(t) = args.get(i + 1) {
                    targets.push((*t).clone());
                }
            } else if name == "curl"
                && (a.text == "--remote-name" || cluster(a).is_some_and(|c| c.contains('O')))
            {
                writes = true;
            }
        }
        if !targets.is_empty() {
            targets.retain(|t| t.text != "-");
            if !targets.is_empty() {
                self.write_all(dir, &targets, false);
            }
        } else if writes {
            self.write_all(dir, &[], false);
        }
    }

    fn unpack(&mut self, dir: &Option<PathBuf>, name: &str, args: &[&Word]) {
        let extracts = name == "unzip"
            || args.iter().enumerate().any(|(i, a)| {
                a.text == "--extract"
                    || a.text == "--get"
                    || cluster(a).is_some_and(|c| c.contains('x'))
                    || (i == 0 && !a.text.starts_with('-') && a.text.contains('x'))
            });
        if !extracts {
            return;
        }
        let flag = if name == "unzip" { "-d" } else { "-C" };
        let into = args
            .iter()
            .position(|a| a.text == flag)
            .and_then(|i| args.get(i + 1))
            .map(|w| (*w).clone());
        match into {
            Some(d) => self.write_all(dir, &[d], false),
            None => self.write_all(dir, &[], false),
        }
    }

    fn interpreter(
        &mut self,
        dir: &Option<PathBuf>,
        lang: Lang,
        args: &[&Word],
        stdin: Option<&str>,
        piped: bool,
    ) {
        let mut code: Option<String> = None;
        let mut inline = false;
        let mut script_operand = false;
        let mut i = 0;
        while i < args.len() {
            let a = args[i];
            let t = a.text.as_str();
            if let Some(flag) = lang.code_flag(t, a) {
                inline = true;
                match flag {
                    CodeFlag::Next => {
                        code = args.get(i + 1).map(|w| w.text.clone());
                    }
                    CodeFlag::Joined(text) => code = Some(text),
                    CodeFlag::NoCode => {}
                }
                break;
            }
            if lang == Lang::Python && t == "-m" {
                // `python -m pip install …` installs; any other module is a program.
                let module: Vec<&Word> = args[i + 1..].to_vec();
                if let Some(m) = module.first() {
                    if installs(&m.text, &module[1..]) {
                        let inside = self.dir_inside(dir);
                        self.mutation(inside);
                    }
                }
                return;
            }
            if t == "-" {
                break;
            }
            if !t.starts_with('-') {
                script_operand = true;
                break;
            }
            i += 1;
        }
        if !inline && !script_operand && (stdin.is_some() || piped) {
            // The script comes on standard input: a heredoc, a here-string or a pipe.
            inline = true;
            code = stdin.map(str::to_owned);
        }
        if !inline {
            return;
        }
        self.facts.inline_code = true;
        match (lang, code) {
            (Lang::Shell, Some(code)) => self.text(dir.clone(), &code),
            (Lang::PowerShell, _) | (_, None) => {
                let inside = self.dir_inside(dir);
                self.mutation(inside);
            }
            (_, Some(code)) => {
                if writes_files(&code) {
                    let targets: Vec<Word> = string_literals(&code)
                        .into_iter()
                        .map(|l| l.trim_start_matches(['>', '+', '<']).trim().to_owned())
                        .filter(|l| {
                            let mode = l.len() <= 3 && l.chars().all(|c| "rwaxbt+".contains(c));
                            !l.is_empty()
                                && !mode
                                && !l.contains(char::is_whitespace)
                                && l.len() < 512
                        })
                        .map(|l| literal(&l))
                        .collect();
                    let mut inside = self.dir_inside(dir);
                    for t in &targets {
                        inside |= self.write(dir, t, false);
                    }
                    self.mutation(inside);
                }
            }
        }
    }
}

/// The words of a simple command without leading assignments, keywords and wrappers (`sudo`,
/// `env`, `nice`, `timeout`, …) that only run the command after them.
fn strip_prefixes<'w>(words: &[&'w Word]) -> Vec<&'w Word> {
    let mut i = 0;
    while i < words.len() {
        let t = words[i].text.as_str();
        let assignment = t.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit())
        });
        if assignment {
            i += 1;
            continue;
        }
        let takes: &[&str] = match basename(t) {
            "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{" | "time" => {
                i += 1;
                continue;
            }
            "sudo" | "doas" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
            "env" => &["-u", "-C", "-S", "--unset", "--chdir"],
            "nice" => &["-n", "--adjustment"],
            "ionice" => &["-c", "-n", "-p"],
            "timeout" => &["-s", "-k", "--signal", "--kill-after"],
            "command" | "builtin" | "exec" | "nohup" | "stdbuf" | "setsid" | "chronic" => &[],
            _ => break,
        };
        let wrapper = basename(t);
        i += 1;
        while i < words.len() && is_flag(words[i]) {
            i += if takes.contains(&words[i].text.as_str()) {
                2
            } else {
                1
            };
        }
        if wrapper == "timeout" && i < words.len() {
            i += 1;
        }
    }
    words[i.min(words.len())..].to_vec()
}

fn owned(words: Vec<&Word>) -> Vec<Word> {
    words.into_iter().cloned().collect()
}

/// Where `cp`, `mv`, `ln`, `install` write: `-t DIR` or the last operand, and the destination
/// joined with each source's name (the destination may be a folder).
fn destinations(args: &[&Word], with_arg: &[&str]) -> Vec<Word> {
    let mut with: Vec<&str> = with_arg.to_vec();
    with.push("-t");
    let ops = operands(args, &with);
    let target_dir = args.iter().enumerate().find_map(|(i, a)| {
        if a.text == "-t" {
            args.get(i + 1).map(|w| (*w).clone())
        } else {
            a.text.strip_prefix("--target-directory=").map(|d| Word {
                text: d.to_owned(),
                raw: d.to_owned(),
            })
        }
    });
    let (dest, sources): (Word, Vec<&Word>) = match target_dir {
        Some(d) => (d, ops),
        None => match ops.split_last() {
            Some((last, rest)) if !rest.is_empty() => ((*last).clone(), rest.to_vec()),
            _ => return Vec::new(),
        },
    };
    let mut out = vec![dest.clone()];
    for s in sources {
        let name = basename(s.text.trim_end_matches('/'));
        if !name.is_empty() {
            let joined = format!("{}/{name}", dest.text.trim_end_matches('/'));
            out.push(Word {
                raw: joined.clone(),
                text: joined,
            });
        }
    }
    out
}
