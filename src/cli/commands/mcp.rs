//! `iced mcp` (SPEC 20.18): a Model Context Protocol server on standard input and output, built on
//! the official Rust SDK (`rmcp`). This file is the protocol side: whom the server serves, the
//! tools it lists to them, and how an answer or a refusal goes back. Every tool is the verb it
//! names, called as the command line calls it (`mcp_tools`), so no rule of the loop has a second
//! path here.

use super::mcp_tools::{self, Role, Server, Tool};
use crate::cli::Output;
use crate::refusal::{io_error, Refusal};
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

#[derive(clap::Args)]
pub struct Args {
    /// Whose tools to serve: `host` (step and receipt), `implementer` (a lane's decision, questions, escalation and report) or `validator`/`refuter` (the read tools); default ICED_ROLE, else implementer when a lane is named, else host.
    #[arg(long, value_enum)]
    pub role: Option<Role>,
    /// The run of the lane the implementer builds (default: ICED_RUN).
    #[arg(long)]
    pub run: Option<String>,
    /// The lane the implementer builds (default: ICED_LANE).
    #[arg(long)]
    pub lane: Option<String>,
    /// The repository to serve (its root or a folder inside it; default: the current directory's). A runner names the checkout, since a lane's harness starts the server in the lane's worktree.
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// Whom to serve: from the arguments, else the environment a runner gives its child (SPEC 20.1).
fn serving(args: Args) -> Server {
    let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
    let run = args.run.or_else(|| env("ICED_RUN"));
    let lane = args.lane.or_else(|| env("ICED_LANE"));
    let lane = run.zip(lane);
    let role = args
        .role
        .unwrap_or_else(|| match env("ICED_ROLE").as_deref() {
            Some("host") => Role::Host,
            Some("implementer") => Role::Implementer,
            Some(_) => Role::Reader,
            None if lane.is_some() => Role::Implementer,
            None => Role::Host,
        });
    Server { role, lane }
}

/// Serve one client until its input closes. The verbs block (a step may wait up to its `wait`),
/// so each call runs on a thread of its own and the protocol goes on meanwhile.
pub fn run(args: Args) -> Result<Output, Refusal> {
    if let Some(dir) = &args.repo {
        // Every tool finds the repository from the current directory, as its verb does.
        std::env::set_current_dir(dir).map_err(|e| {
            Refusal::new(
                "mcp",
                "usage",
                format!("`--repo {}`: {e}", dir.display()),
                "name the repository's root (or a folder inside it)",
            )
            .exit(crate::refusal::Exit::Usage)
        })?;
    }
    let server = serving(args);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| io_error("mcp", format!("cannot start the server's runtime: {e}")))?;
    // The protocol keeps its own copy of standard output, and descriptor 1 becomes standard
    // error: what a verb's child process (a git) or a stray print writes there can never reach
    // the client as a protocol message.
    let protocol = nix::unistd::dup(std::io::stdout())
        .and_then(|fd| nix::unistd::dup2_stdout(std::io::stderr()).map(|()| fd))
        .map_err(|e| io_error("mcp", format!("cannot set standard output aside: {e}")))?;
    runtime.block_on(async {
        let output = tokio::fs::File::from_std(std::fs::File::from(protocol));
        let service = server
            .serve((tokio::io::stdin(), output))
            .await
            .map_err(|e| io_error("mcp", format!("the client did not initialize: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| io_error("mcp", format!("the server stopped: {e}")))?;
        Ok::<(), Refusal>(())
    })?;
    // The protocol owned standard output; nothing more is printed on it.
    Ok(Output::new(Value::Null, ""))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("iced", env!("CARGO_PKG_VERSION")))
            .with_instructions(mcp_tools::instructions(self.role))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.tools().map(Tool::listed).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !mcp_tools::TOOLS.iter().any(|t| t.name == name) {
            return Err(McpError::method_not_found::<CallToolRequestMethod>());
        }
        let input = Value::Object(request.arguments.unwrap_or_default());
        let server = self.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(mcp_tools::call(&server, &name, input));
        });
        let answer = rx
            .await
            .unwrap_or_else(|_| Err(io_error("mcp", "the tool's call ended without an answer")));
        Ok(CallToolResponse::Complete(match answer {
            Ok(value) => CallToolResult::structured(value),
            Err(refusal) => tool_error(&refusal),
        }))
    }
}

/// A refusal as the caller's model reads it: a tool error (not a protocol error) whose text says
/// the reason, the code and the remedy, and whose structured content is the refusal's JSON.
fn tool_error(refusal: &Refusal) -> CallToolResult {
    let text = format!(
        "error: {}\n  step: {}\n  code: {}\n\nhint: {}",
        refusal.reason, refusal.step, refusal.code, refusal.remedy
    );
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(refusal.to_json());
    result
}
