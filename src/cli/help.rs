//! Help by audience (issue 12, item 4): `iced --help` lists a person's verbs; the machinery a
//! driving host or a building agent uses (`implement`, `mcp`, `guard`, `hook`, `decision`, `schema`) is
//! listed by `iced help agent` (or `iced --help --agent`), with the step and receipt contract in
//! a few lines. Each verb's own help opens by saying whose it is.

/// What opens a person's verb's help.
pub const PERSON: &str = "For a person.";
/// What opens a machinery verb's help.
pub const MACHINERY: &str =
    "Machinery: for a driving host, an agent, cron or a supervisor (`iced help agent`).";

/// The line under `iced --help` that points at the rest.
pub const AFTER_HELP: &str = "Exit codes: 0 done, 1 internal error, 2 usage, 3 refused, 4 needs a person.\nEvery verb takes --json; a refusal is then {\"refused\": {\"step\", \"code\", \"reason\", \"remedy\"}} on stdout.\nVerbs for a driving host or a building agent (implement, mcp, guard, hook, decision, schema): `iced help agent`.";

/// `iced help agent`: the machinery verbs and the contract of the loop's step interface.
pub const AGENT: &str = "\
iced, for a driving host or a building agent. A person's verbs: `iced --help`.

The loop (one keyed, recorded step per call; a killed call replays, never repeats):
  iced build <id> --json              admit an approved unit and drive it; with no runner
                                      configured, the run is the host's: the last line says
                                      what to do, as `implement step` does
  iced implement step --json          do one step and answer `action`:
      start_agent   start a fresh agent for `role` in `worktree` with the file `brief`; it writes
                    its report to `receipt_path`; then hand it in (below)
      advanced      one step was done: call again
      waiting       agents or commands are running: call again later
      delivered | blocked | handback | paused
                    nothing for the host to do; `iced run handover` says why for a person
  iced implement receipt <receipt_path> --json [--model M --session S]
                                      hand in the report the agent wrote, as it wrote it; a
                                      report that is refused can be fixed and handed in again
                                      within the same attempt
  --until-host [--wait <seconds>]     (on step and receipt) go on stepping, each step its own,
                                      until the answer needs the host: start_agent, delivered,
                                      blocked, handback or paused; with --wait, first wait (no
                                      polling) up to that long while only the loop's own
                                      commands or agents run. Its start_agent is small: `brief`
                                      from the repository root (the brief names the worktree and
                                      ends with the exact receipt command), and `next` the
                                      command to run when the agent ends. A host's loop:
                                      `build`, then one `implement receipt <path> --until-host
                                      --wait 600` per agent

The guard (what an agent may change):
  iced guard --json                   judge one proposed tool call, read as JSON on stdin
  iced hook claude                    the guard as Claude Code's PreToolUse hook

The same as Model Context Protocol tools (a server on stdin/stdout):
  iced mcp [--role host|implementer|validator] [--run R --lane L] [--repo DIR]
                                      a host gets iced_step and iced_receipt; a lane's
                                      implementer iced_decision, iced_questions, iced_escalate
                                      and iced_submit; everyone iced_status, iced_run_show and
                                      iced_handover; a refusal is a tool error. `iced init
                                      --host claude|codex` registers it for the project

A building agent's own record:
  iced decision <id> --decision T --why T [--alternatives T]
                                      log a significant choice in intent/<id>/decisions.md
  iced schema report|validator        the JSON Schema of the report or answer you write

Each prints JSON with --json; a refusal is {\"refused\": {\"step\", \"code\", \"reason\", \"remedy\"}}.
Exit codes: 0 done, 1 internal error, 2 usage, 3 refused, 4 needs a person.
`iced <verb> --help` gives one verb whole.
";

/// The agent help was asked for: `iced help agent`, or `--help`/`-h` with `--agent` and no verb.
pub fn wants_agent_help(args: &[String]) -> bool {
    let rest: Vec<&str> = args
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|a| *a != "--json")
        .collect();
    match rest.as_slice() {
        ["help", "agent"] | ["help", "--agent"] => true,
        words => {
            words.contains(&"--agent")
                && words.iter().any(|w| matches!(*w, "--help" | "-h"))
                && words.iter().all(|w| w.starts_with('-'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        std::iter::once("iced")
            .chain(line.split_whitespace())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_agent_help_is_asked_for_these_ways_only() {
        for yes in ["help agent", "--help --agent", "--agent -h", "help --agent"] {
            assert!(wants_agent_help(&args(yes)), "{yes}");
        }
        for no in ["help", "--help", "build --help --agent", "agent", "--agent"] {
            assert!(!wants_agent_help(&args(no)), "{no}");
        }
    }
}
