//! A POSIX-shell tokenizer, enough for the guard's heuristic (SPEC 24.1): words with their quotes
//! removed, control operators, redirections with their targets, heredoc bodies, and the text of
//! every command substitution (analysed on its own). Quoted text is data: `git commit -m "rm -rf
//! x"` is three words and a message. Nothing is expanded and nothing runs.
//!
//! In a word's text, what the shell would expand is a sentinel: [`EXPANDED`] for a parameter,
//! command or arithmetic expansion or a leading `~`, [`ANY`] for an unquoted `*` or `[`, [`ONE`]
//! for an unquoted `?`. Quoted `*` and `?` stay themselves.

/// Stands for an expansion whose value the guard cannot know.
pub const EXPANDED: char = '\u{0}';
/// An unquoted `*` (or bracket expression): any run of characters.
pub const ANY: char = '\u{1}';
/// An unquoted `?`: one character.
pub const ONE: char = '\u{2}';

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// The word as written in the command, quotes and all.
    pub raw: String,
}

impl Word {
    /// No expansion and no glob: the text is exactly what the command gets.
    pub fn is_literal(&self) -> bool {
        !self.text.contains([EXPANDED, ANY, ONE])
    }

    /// The text as a person would read it (sentinels shown as `$…`, `*`, `?`).
    pub fn shown(&self) -> String {
        self.text
            .replace(EXPANDED, "$…")
            .replace(ANY, "*")
            .replace(ONE, "?")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `;`, a newline, `;;`.
    Seq,
    And,
    Or,
    Pipe,
    Background,
    Open,
    Close,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redir {
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `>&file`: output into a file. `fd` is the descriptor written
    /// (`None` for stdout, `Some(2)` for `2>`; `&>` writes both and is `None`).
    Out { fd: Option<u32>, target: Word },
    /// `<`, `<>`, `<&`, `>&2`: reads, or duplicates a descriptor; changes no file.
    Other,
    /// A heredoc or here-string: text on the command's standard input.
    Input { body: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Word(Word),
    Op(Op),
    Redir(Redir),
}

#[derive(Debug, Default)]
pub struct Lexed {
    pub toks: Vec<Tok>,
    /// The text inside each `$( … )` and `` ` … ` ``.
    pub substitutions: Vec<String>,
}

struct Lexer<'a> {
    s: &'a [char],
    i: usize,
    out: Lexed,
    /// Heredocs whose bodies start after the current line: (token index, delimiter, strip tabs).
    pending: Vec<(usize, String, bool)>,
    in_test: bool,
}

pub fn lex(command: &str) -> Lexed {
    let chars: Vec<char> = command.chars().collect();
    let mut lx = Lexer {
        s: &chars,
        i: 0,
        out: Lexed::default(),
        pending: Vec::new(),
        in_test: false,
    };
    lx.run();
    lx.out
}

fn is_meta(c: char) -> bool {
    matches!(
        c,
        ';' | '&' | '|' | '(' | ')' | '<' | '>' | '\n' | ' ' | '\t'
    )
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn starts(&self, text: &str) -> bool {
        text.chars()
            .enumerate()
            .all(|(k, c)| self.peek(k) == Some(c))
    }

    fn op(&mut self, op: Op, len: usize) {
        self.i += len;
        self.out.toks.push(Tok::Op(op));
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' => self.i += 1,
                '\\' if self.peek(1) == Some('\n') => self.i += 2,
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '\n' => {
                    self.op(Op::Seq, 1);
                    self.heredoc_bodies();
                }
                ';' => {
                    let len = if self.peek(1) == Some(';') { 2 } else { 1 };
                    self.op(Op::Seq, len);
                }
                '&' if self.peek(1) == Some('&') => self.op(Op::And, 2),
                '&' if self.peek(1) == Some('>') => {
                    let len = if self.peek(2) == Some('>') { 3 } else { 2 };
                    self.i += len;
                    self.redirect_target(None);
                }
                '&' => self.op(Op::Background, 1),
                '|' if self.peek(1) == Some('|') => self.op(Op::Or, 2),
                '|' if self.peek(1) == Some('&') => self.op(Op::Pipe, 2),
                '|' => self.op(Op::Pipe, 1),
                '(' if self.peek(1) == Some('(') => self.skip_arithmetic(),
                '(' => self.op(Op::Open, 1),
                ')' => self.op(Op::Close, 1),
                '<' | '>' if self.in_test => {
                    self.i += 1;
                    self.out.toks.push(Tok::Word(Word {
                        text: c.to_string(),
                        raw: c.to_string(),
                    }));
                }
                '<' | '>' => self.redirect(None),
                _ => self.word_or_fd(),
            }
        }
    }

    /// `(( … ))` at a command's start is arithmetic: its `<` and `>` compare numbers.
    fn skip_arithmetic(&mut self) {
        self.i += 2;
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        if self.peek(0) == Some(')') {
                            self.i += 1;
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        self.out.toks.push(Tok::Word(Word {
            text: EXPANDED.to_string(),
            raw: "((…))".into(),
        }));
    }

    fn word_or_fd(&mut self) {
        let start = self.i;
        let word = self.word();
        let digits = self.i > start
            && self.s[start..self.i].iter().all(char::is_ascii_digit)
            && matches!(self.peek(0), Some('<' | '>'));
        if digits {
            self.redirect(word.text.parse().ok());
            return;
        }
        match word.text.as_str() {
            "[[" => self.in_test = true,
            "]]" => self.in_test = false,
            _ => {}
        }
        self.out.toks.push(Tok::Word(word));
    }

    /// A redirection starting at `<` or `>`, with the descriptor written before it, if any.
    fn redirect(&mut self, fd: Option<u32>) {
        if self.starts("<<<") {
            self.i += 3;
            self.skip_blanks();
            let body = self.word().text;
            self.out.toks.push(Tok::Redir(Redir::Input { body }));
        } else if self.starts("<<") {
            self.i += 2;
            let strip = self.peek(0) == Some('-');
            if strip {
                self.i += 1;
            }
            self.skip_blanks();
            let delimiter = self.word().text.replace(EXPANDED, "$");
            self.pending.push((self.out.toks.len(), delimiter, strip));
            self.out.toks.push(Tok::Redir(Redir::Input {
                body: String::new(),
            }));
        } else if self.starts("<&") || self.starts("<>") || self.starts("<") {
            self.i += if self.starts("<&") || self.starts("<>") {
                2
            } else {
                1
            };
            self.skip_blanks();
            self.word();
            self.out.toks.push(Tok::Redir(Redir::Other));
        } else if self.starts(">&") {
            self.i += 2;
            self.skip_blanks();
            let target = self.word();
            let dup = target.text == "-" || target.text.chars().all(|c| c.is_ascii_digit());
            if dup && !target.text.is_empty() {
                self.out.toks.push(Tok::Redir(Redir::Other));
            } else {
                // `>&file` (csh style) writes both descriptors into the file.
                self.out
                    .toks
                    .push(Tok::Redir(Redir::Out { fd: None, target }));
            }
        } else {
            // `>`, `>>`, `>|`.
            self.i += 1;
            if matches!(self.peek(0), Some('>' | '|')) {
                self.i += 1;
            }
            self.redirect_target(fd);
        }
    }

    fn redirect_target(&mut self, fd: Option<u32>) {
        self.skip_blanks();
        let target = self.word();
        self.out.toks.push(Tok::Redir(Redir::Out { fd, target }));
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.i += 1;
        }
    }

    /// After a newline: the bodies of the heredocs opened on the line just ended.
    fn heredoc_bodies(&mut self) {
        for (index, delimiter, strip) in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            while self.i < self.s.len() {
                let end = self.s[self.i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.s.len(), |p| self.i + p);
                let line: String = self.s[self.i..end].iter().collect();
                self.i = (end + 1).min(self.s.len());
                let bare = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if bare == delimiter {
                    break;
                }
                body.push_str(bare);
                body.push('\n');
            }
            self.out.toks[index] = Tok::Redir(Redir::Input { body });
        }
    }

    /// One word, its quotes removed and its expansions replaced by sentinels.
    fn word(&mut self) -> Word {
        let mut text = String::new();
        let at_start = self.i;
        while let Some(c) = self.peek(0) {
            if is_meta(c) {
                break;
            }
            match c {
                '\'' => {
                    self.i += 1;
                    while let Some(c) = self.peek(0) {
                        self.i += 1;
                        if c == '\'' {
                            break;
                        }
                        text.push(c);
                    }
                }
                '"' => {
                    self.i += 1;
                    self.double_quoted(&mut text);
                }
                '\\' => {
                    if let Some(next) = self.peek(1) {
                        if next != '\n' {
                            text.push(next);
                        }
                    }
                    self.i += 2;
                }
                '$' if self.peek(1) == Some('\'') => {
                    self.i += 2;
                    while let Some(c) = self.peek(0) {
                        self.i += 1;
                        match c {
                            '\\' => {
                                if let Some(n) = self.peek(0) {
                                    text.push(n);
                                    self.i += 1;
                                }
                            }
                            '\'' => break,
                            c => text.push(c),
                        }
                    }
                }
                '$' => self.dollar(&mut text),
                '`' => self.backtick(&mut text),
                '~' if self.i == at_start => {
                    self.i += 1;
                    text.push(EXPANDED);
                }
                '*' => {
                    self.i += 1;
                    text.push(ANY);
                }
                '[' if self.closes_bracket() => {
                    while let Some(c) = self.peek(0) {
                        self.i += 1;
                        if c == ']' {
                            break;
                        }
                    }
                    text.push(ANY);
                }
                '?' => {
                    self.i += 1;
                    text.push(ONE);
                }
                c => {
                    self.i += 1;
                    text.push(c);
                }
            }
        }
        // An escape or quote at the very end may have stepped past it.
        self.i = self.i.min(self.s.len());
        let raw = self.s[at_start..self.i].iter().collect();
        Word { text, raw }
    }

    /// Whether a `[` starts a bracket expression (a `]` follows before a word ends).
    fn closes_bracket(&self) -> bool {
        self.s[self.i..]
            .iter()
            .take_while(|&&c| !is_meta(c))
            .any(|&c| c == ']')
    }

    fn double_quoted(&mut self, text: &mut String) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.i += 1;
                    return;
                }
                '\\' => {
                    match self.peek(1) {
                        Some(n @ ('$' | '`' | '"' | '\\')) => text.push(n),
                        Some('\n') => {}
                        Some(n) => {
                            text.push('\\');
                            text.push(n);
                        }
                        None => text.push('\\'),
                    }
                    self.i += 2;
                }
                '$' => self.dollar(text),
                '`' => self.backtick(text),
                c => {
                    self.i += 1;
                    text.push(c);
                }
            }
        }
    }

    /// `$name`, `${…}`, `$( … )`, `$(( … ))`; a lone `$` is itself.
    fn dollar(&mut self, text: &mut String) {
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                self.i += 3;
                self.balanced('(', ')', 2);
                text.push(EXPANDED);
            }
            Some('(') => {
                self.i += 2;
                let start = self.i;
                self.balanced('(', ')', 1);
                self.i = self.i.min(self.s.len());
                let end = self.i.saturating_sub(1).max(start);
                self.out
                    .substitutions
                    .push(self.s[start..end].iter().collect());
                text.push(EXPANDED);
            }
            Some('{') => {
                self.i += 2;
                self.balanced('{', '}', 1);
                text.push(EXPANDED);
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.i += 2;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.i += 1;
                    }
                }
                text.push(EXPANDED);
            }
            _ => {
                self.i += 1;
                text.push('$');
            }
        }
    }

    /// Skip to the `depth`-th unmatched `close`, stepping over quoted text.
    fn balanced(&mut self, open: char, close: char, mut depth: usize) {
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '\\' => self.i += 1,
                '\'' => {
                    while self.peek(0).is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                    self.i += 1;
                }
                '"' => {
                    while let Some(c) = self.peek(0) {
                        self.i += 1;
                        match c {
                            '\\' => self.i += 1,
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    fn backtick(&mut self, text: &mut String) {
        self.i += 1;
        let mut inner = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '\\' => {
                    if let Some(n) = self.peek(0) {
                        inner.push(n);
                        self.i += 1;
                    }
                }
                '`' => break,
                c => inner.push(c),
            }
        }
        self.out.substitutions.push(inner);
        text.push(EXPANDED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &str) -> Vec<String> {
        lex(command)
            .toks
            .into_iter()
            .map(|t| match t {
                Tok::Word(w) => w.shown(),
                Tok::Op(op) => format!("<{op:?}>"),
                Tok::Redir(Redir::Out { fd, target }) => format!("[>{fd:?} {}]", target.shown()),
                Tok::Redir(Redir::Other) => "[dup]".into(),
                Tok::Redir(Redir::Input { body }) => format!("[in {body:?}]"),
            })
            .collect()
    }

    #[test]
    fn quotes_are_removed_and_quoted_text_is_one_word() {
        assert_eq!(
            words(r#"git commit -m "rm -rf x > y" && echo 'a;b' c\ d"#),
            [
                "git",
                "commit",
                "-m",
                "rm -rf x > y",
                "<And>",
                "echo",
                "a;b",
                "c d"
            ]
        );
        assert_eq!(words(r#"echo "a\"b" $'x\'y'"#), ["echo", "a\"b", "x'y"]);
    }

    #[test]
    fn redirections_with_descriptors_and_duplicates() {
        assert_eq!(
            words("ls 2>/dev/null >out.txt 2>&1 &>all >>log <in"),
            [
                "ls",
                "[>Some(2) /dev/null]",
                "[>None out.txt]",
                "[dup]",
                "[>None all]",
                "[>None log]",
                "[dup]"
            ]
        );
        assert_eq!(words("echo x>f"), ["echo", "x", "[>None f]"]);
        assert_eq!(words("echo 12>f"), ["echo", "[>Some(12) f]"]);
    }

    #[test]
    fn expansions_and_globs_are_marked() {
        assert_eq!(
            words(r#"rm "$X/a" ~/b *.rs "*" ${Y}c $(pwd)/d `pwd` [ab]x"#),
            ["rm", "$…/a", "$…/b", "*.rs", "*", "$…c", "$…/d", "$…", "*x"]
        );
        let lexed = lex("echo $(rm -rf x) `touch y`");
        assert_eq!(lexed.substitutions, ["rm -rf x", "touch y"]);
        assert_eq!(
            words("[ -f x ] && echo $1"),
            ["[", "-f", "x", "]", "<And>", "echo", "$…"]
        );
    }

    #[test]
    fn heredoc_bodies_are_stdin_not_commands() {
        let toks = words("cat > f.txt <<'EOF'\nrm -rf / > x\nEOF\necho done");
        assert_eq!(
            toks,
            [
                "cat",
                "[>None f.txt]",
                "[in \"rm -rf / > x\\n\"]",
                "<Seq>",
                "echo",
                "done"
            ]
        );
        assert_eq!(
            words("python3 <<< 'print(1)'"),
            ["python3", "[in \"print(1)\"]"]
        );
    }

    #[test]
    fn tests_and_arithmetic_compare_instead_of_redirecting() {
        assert_eq!(
            words("[[ a > b ]] && (( 1 > 2 )); x"),
            ["[[", "a", ">", "b", "]]", "<And>", "$…", "<Seq>", "x"]
        );
        assert_eq!(words("# rm x > y\nls"), ["<Seq>", "ls"]);
        assert_eq!(
            words("(cd a; ls) | tee -a b"),
            ["<Open>", "cd", "a", "<Seq>", "ls", "<Close>", "<Pipe>", "tee", "-a", "b"]
        );
    }
}
