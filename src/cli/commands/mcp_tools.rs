//! The tools of `iced mcp` (SPEC 20.18): each one's name, words, input and the verb it runs. The
//! input of a host's or a reader's tool is a type that both parses the call and gives its schema;
//! the implementer's report tools take the lane report's own contract
//! (`spec/schema/report.schema.json`), checked by the rules `implement receipt` applies
//! (`run::submit`).

use super::implement::{self, ImplementCommand, ReceiptArgs, StepArgs, UntilHost};
use super::lifecycle::{self, DecisionArgs};
use super::run::{handover, show, RunCommand};
use super::{repo, status};
use crate::cli::Output;
use crate::refusal::{Exit, Refusal};
use crate::repo::Repo;
use crate::run::Ctx;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::JsonObject;
use rmcp::schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::{Arc, LazyLock};

/// Whom the server serves: each is given its own tools (SPEC 20.18).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    Host,
    Implementer,
    /// A validator or the refuter: an agent that only reads.
    #[value(name = "validator", alias = "refuter")]
    Reader,
}

/// The server: the role it serves and the lane it builds, when one is named.
#[derive(Clone)]
pub struct Server {
    pub role: Role,
    pub lane: Option<(String, String)>,
}

impl Server {
    /// The tools this role is given, in the order they are listed.
    pub fn tools(&self) -> impl Iterator<Item = &'static Tool> + '_ {
        TOOLS.iter().filter(move |t| t.roles.contains(&self.role))
    }
}

pub fn role_word(role: Role) -> &'static str {
    match role {
        Role::Host => "host",
        Role::Implementer => "lane's implementer",
        Role::Reader => "validator or refuter",
    }
}

/// One tool as listed: who is given it and its input schema.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub roles: &'static [Role],
    schema: fn() -> Arc<JsonObject>,
}

impl Tool {
    pub fn listed(&self) -> rmcp::model::Tool {
        rmcp::model::Tool::new(self.name, self.description, (self.schema)())
    }
}

const EVERYONE: &[Role] = &[Role::Host, Role::Implementer, Role::Reader];
const HOST: &[Role] = &[Role::Host];
const IMPLEMENTER: &[Role] = &[Role::Implementer];

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "iced_status",
        description: "One unit (default: the active one) with its contract, status, children, lint and goal coverage, as `iced status --json` prints it. Writes nothing.",
        roles: EVERYONE,
        schema: schema_for_type::<StatusInput>,
    },
    Tool {
        name: "iced_run_show",
        description: "One run (default: the live one, else the latest) with its lanes, stages, step records, findings and agents, as `iced run show --json` prints it. Writes nothing.",
        roles: EVERYONE,
        schema: schema_for_type::<RunInput>,
    },
    Tool {
        name: "iced_handover",
        description: "What a fresh driver needs to continue a run (default: every run): settings in force, each lane's next move, what is awaited, hazards; as `iced run handover --json`. Writes nothing.",
        roles: EVERYONE,
        schema: schema_for_type::<RunInput>,
    },
    Tool {
        name: "iced_step",
        description: "Do one step of the live run and say what to do next, as `iced implement step --json`: `start_agent` (start a fresh agent on the brief; it writes its report; then call iced_receipt), `waiting`, `advanced`, `delivered`, `blocked`, `handback`, `paused` or `nothing`. With until_host it steps on until the answer needs you; wait (seconds, with until_host) first waits on the loop's own activities.",
        roles: HOST,
        schema: schema_for_type::<StepInput>,
    },
    Tool {
        name: "iced_receipt",
        description: "Hand in the report of the agent you started, at the path its start_agent named, as `iced implement receipt <path> --json`; with until_host (and wait) it then steps on until the answer needs you. Refuses a report at another path, of a superseded attempt, malformed or forged, recording nothing.",
        roles: HOST,
        schema: schema_for_type::<ReceiptInput>,
    },
    Tool {
        name: "iced_decision",
        description: "Log a significant choice you made while building: appends an entry (Decision, Why, Alternatives) to the unit's decisions.md in your worktree, as `iced decision`. Commit it with your work.",
        roles: IMPLEMENTER,
        schema: schema_for_type::<DecisionInput>,
    },
    Tool {
        name: "iced_questions",
        description: "Stop and ask a person: submits your lane report with these questions (the loop numbers them; at most questions.max). The lane waits for the answers; end your turn after it.",
        roles: IMPLEMENTER,
        schema: questions_schema,
    },
    Tool {
        name: "iced_escalate",
        description: "Stop for a person: submits your lane report with an escalation (ambiguity, conflict, change-expectation, irreversible or stuck), and for change-expectation or conflict a contract proposal (`- [E4] text {verify: ...}` lines: the same id replaces, a new id adds, `(remove)` drops). End your turn after it.",
        roles: IMPLEMENTER,
        schema: escalate_schema,
    },
    Tool {
        name: "iced_submit",
        description: "Submit your lane report: a summary and evidence for each expectation (or a handback). It is checked as the receipt checks it (unknown or loop-only fields, kinds, sizes) and written where this attempt's report goes; a refusal names the field and writes nothing. Commit your work first; end your turn after it.",
        roles: IMPLEMENTER,
        schema: report_schema,
    },
];

/// What the server tells its client about itself, by role.
pub fn instructions(role: Role) -> String {
    let what = match role {
        Role::Host => "Drive the build loop: call iced_step (until_host: true) and do what its answer says; when it says start_agent, start a fresh agent on the brief, then hand its report in with iced_receipt.",
        Role::Implementer => "Build your lane as the brief says; log significant choices with iced_decision; finish with iced_submit (or stop for a person with iced_escalate or iced_questions).",
        Role::Reader => "Read the unit and the run; you change nothing.",
    };
    format!("iced, for a {}. {what}", role_word(role))
}

/// `iced status [id]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct StatusInput {
    /// The unit (id, number or unique part of an id); default: the active unit.
    pub id: Option<String>,
}

/// `iced run show [run]`, `iced run handover [run]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct RunInput {
    /// The run id (or a unique part of it); default: the live run, else the latest.
    pub run: Option<String>,
}

/// `iced implement step [--run] [--until-host [--wait]]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct StepInput {
    /// The run, when several are live.
    pub run: Option<String>,
    /// Go on stepping, each step its own, until the answer needs you (start_agent, delivered, blocked, handback, paused) or the run only waits.
    #[serde(default)]
    pub until_host: bool,
    /// With until_host: while the run only waits on the loop's own activities, wait for them up to this many seconds, then answer.
    pub wait: Option<u64>,
}

/// `iced implement receipt <path> [--run] [--model] [--session] [--until-host [--wait]]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct ReceiptInput {
    /// The report's path, as start_agent named it (from the repository root, or absolute).
    pub path: String,
    /// The run, when several are live.
    pub run: Option<String>,
    /// The model the agent used, as you know it (kept in the run record).
    pub model: Option<String>,
    /// Your session of that agent (kept in the run record).
    pub session: Option<String>,
    /// Then go on stepping until the answer needs you.
    #[serde(default)]
    pub until_host: bool,
    /// With until_host: wait up to this many seconds on the loop's own activities first.
    pub wait: Option<u64>,
}

/// `iced decision <unit> --decision --why [--alternatives]`, in the lane's worktree.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct DecisionInput {
    /// What was decided.
    pub decision: String,
    /// Why.
    pub why: String,
    /// What else was considered.
    pub alternatives: Option<String>,
}

/// `spec/schema/report.schema.json`, the lane report's contract, as shipped.
static REPORT: LazyLock<JsonObject> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../../spec/schema/report.schema.json"))
        .expect("a shipped schema parses")
});

fn report_schema() -> Arc<JsonObject> {
    Arc::new(REPORT.clone())
}

/// The report's `summary` property, which the stop tools take as an optional key.
fn summary_property() -> Value {
    REPORT["properties"]["summary"].clone()
}

/// The report's `escalate` object, with an optional `summary` beside its keys.
fn escalate_schema() -> Arc<JsonObject> {
    let mut schema = REPORT["properties"]["escalate"].clone();
    schema["properties"]["summary"] = summary_property();
    Arc::new(object(schema))
}

/// `{"questions": <the report's questions>, "summary"?}`.
fn questions_schema() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["questions"],
        "properties": {
            "questions": REPORT["properties"]["questions"].clone(),
            "summary": summary_property(),
        },
    });
    Arc::new(object(schema))
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("a schema is an object"),
    }
}

/// Run tool `name` with `input`, on the caller's thread: a tool the server's role is not given is
/// refused before anything runs.
pub fn call(server: &Server, name: &str, input: Value) -> Result<Value, Refusal> {
    if !server.tools().any(|t| t.name == name) {
        return Err(Refusal::new(
            name,
            "tool-not-offered",
            format!("`{name}` is not one of the tools this server gives a {}", role_word(server.role)),
            "call only the tools `tools/list` lists; a host's server is `iced mcp --role host`, a lane's implementer's names its run and lane",
        ));
    }
    match name {
        "iced_status" => {
            let i: StatusInput = parse(name, input)?;
            answer(status::run(status::Args { id: i.id }))
        }
        "iced_run_show" => {
            let i: RunInput = parse(name, input)?;
            let args = show::Args {
                run: i.run,
                html: None,
            };
            answer(super::run::run(RunCommand::Show(args)))
        }
        "iced_handover" => {
            let i: RunInput = parse(name, input)?;
            let args = handover::Args { run: i.run };
            answer(super::run::run(RunCommand::Handover(args)))
        }
        "iced_step" => {
            let i: StepInput = parse(name, input)?;
            let host = until_host(name, i.until_host, i.wait)?;
            answer(implement::run(ImplementCommand::Step(StepArgs {
                run: i.run,
                host,
            })))
        }
        "iced_receipt" => {
            let i: ReceiptInput = parse(name, input)?;
            let host = until_host(name, i.until_host, i.wait)?;
            let args = ReceiptArgs {
                path: i.path.into(),
                run: i.run,
                model: label(name, "model", i.model)?,
                session: label(name, "session", i.session)?,
                host,
            };
            answer(implement::run(ImplementCommand::Receipt(args)))
        }
        "iced_decision" => {
            let i: DecisionInput = parse(name, input)?;
            decision(server, i)
        }
        "iced_submit" => submit(server, "iced_submit", &input),
        "iced_escalate" | "iced_questions" => {
            let Value::Object(mut fields) = input else {
                unreachable!("arguments are an object");
            };
            let summary = fields.remove("summary");
            let step = if name == "iced_escalate" {
                "iced_escalate"
            } else {
                "iced_questions"
            };
            let (key, stop, said) = if name == "iced_escalate" {
                let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("");
                let said = format!("Stopped for a person: {kind}");
                ("escalate", Value::Object(fields), said)
            } else {
                let questions = fields.remove("questions").unwrap_or(Value::Null);
                if let Some(extra) = fields.keys().next() {
                    return Err(usage(name, format!("unknown field `{extra}`")));
                }
                ("questions", questions, "Questions for a person".to_owned())
            };
            let mut report =
                json!({"summary": summary.unwrap_or(Value::String(said)), "evidence": []});
            report[key] = stop;
            submit(server, step, &report)
        }
        _ => unreachable!("only listed tools are called"),
    }
}

/// The verb's own JSON: what `--json` prints.
fn answer(output: Result<Output, Refusal>) -> Result<Value, Refusal> {
    let output = output?;
    Ok(match output.json_text {
        Some(text) => serde_json::from_str(&text).expect("a verb prints JSON"),
        None => output.json,
    })
}

/// The input of tool `name`, strictly: an unknown, missing or mistyped key is refused by name.
fn parse<T: serde::de::DeserializeOwned>(name: &str, input: Value) -> Result<T, Refusal> {
    serde_json::from_value(input).map_err(|e| usage(name, e.to_string()))
}

fn usage(name: &str, reason: String) -> Refusal {
    Refusal::new(
        name,
        "usage",
        format!("`{name}`: {reason}"),
        "call the tool with the input its schema gives (`tools/list`)",
    )
    .exit(Exit::Usage)
}

/// `--until-host` and `--wait`, with the rule the command line's parser keeps: no wait without it.
fn until_host(name: &str, until_host: bool, wait: Option<u64>) -> Result<UntilHost, Refusal> {
    if wait.is_some() && !until_host {
        return Err(usage(name, "`wait` is taken only with `until_host`".into()));
    }
    Ok(UntilHost { until_host, wait })
}

/// `--model` and `--session`, checked as the command line's parser checks them.
fn label(name: &str, key: &str, given: Option<String>) -> Result<Option<String>, Refusal> {
    given
        .map(|g| {
            crate::run::host::check_label(&g).map_err(|e| usage(name, format!("`{key}`: {e}")))
        })
        .transpose()
}

/// The lane this server's implementer builds.
fn lane_of<'a>(server: &'a Server, name: &str) -> Result<(&'a str, &'a str), Refusal> {
    server
        .lane
        .as_ref()
        .map(|(run, lane)| (run.as_str(), lane.as_str()))
        .ok_or_else(|| {
            Refusal::new(
                name,
                "mcp-lane-unknown",
                "this server was started without a run and a lane",
                "start it with `--run <run> --lane <lane>` (or ICED_RUN and ICED_LANE), as `iced run show` names them",
            )
        })
}

/// `iced decision` in the worktree of the lane, while its implementer is at work.
fn decision(server: &Server, input: DecisionInput) -> Result<Value, Refusal> {
    let name = "iced_decision";
    let (run, lane) = lane_of(server, name)?;
    let repo = repo(name)?;
    let ctx = Ctx::new(&repo, name)?;
    let (lane, _) = crate::run::submit::implementing(&ctx, run, lane)?;
    let Some(worktree) = lane.worktree else {
        return Err(ctx.refuse(
            "mcp-lane-unknown",
            format!("lane `{}` of run `{run}` has no worktree yet", lane.id),
            "call it from the agent the lane's start_agent started",
        ));
    };
    let args = DecisionArgs {
        id: lane.unit,
        decision: input.decision,
        why: input.why,
        alternatives: input.alternatives,
    };
    let root = Repo {
        root: worktree.into(),
    };
    answer(lifecycle::decision_in(&root, args))
}

/// The lane report `report`, checked and written by `run::submit`.
fn submit(server: &Server, name: &'static str, report: &Value) -> Result<Value, Refusal> {
    let (run, lane) = lane_of(server, name)?;
    let repo = repo(name)?;
    let ctx = Ctx::new(&repo, name)?;
    let bytes = serde_json::to_vec_pretty(report).expect("a JSON value serialises");
    let done = crate::run::submit::submit(&ctx, run, lane, &bytes)?;
    Ok(json!({
        "run": done.run,
        "lane": done.lane,
        "attempt": done.attempt,
        "report": done.path,
        "next": "the report is in place for the loop to check; end your turn",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools a harness allows an agent (SPEC 20.8) are the ones its role's server lists.
    #[test]
    fn a_harness_allows_exactly_the_tools_of_the_role() {
        let names = |role| {
            Server { role, lane: None }
                .tools()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Role::Implementer),
            crate::runner::MCP_IMPLEMENTER_TOOLS
        );
        assert_eq!(names(Role::Reader), crate::runner::MCP_READ_TOOLS);
    }
}
