//! Tool dispatch for one round: argument parsing, lookup, concurrent execution, large outputs.

use crate::rights::Refused;
use crate::session::{Emitter, Session};
use futures::future::join_all;
use reef_core::{ContentSource, EventMsg, Message, Need, Tool, ToolCall, ToolContext, ToolOutput};
use reef_workspace::{Workspace, WorkspaceError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Characters of a large output shown inline before the pointer to the saved file.
const PREVIEW_CHARS: usize = 1500;

/// Runs every call of a round concurrently (a model emits calls of one round as independent)
/// and returns the tool-result messages in the order the calls were made.
/// A call in `skipped` does not run: its result is the error text given there.
pub(crate) async fn run_calls(
    session: &Session,
    calls: &[ToolCall],
    skipped: &HashMap<String, String>,
    emitter: &Emitter,
) -> Vec<Message> {
    // Every call is in the audit log before anything of the round runs; one that cannot be
    // recorded does not run.
    let mut unrecorded = HashMap::new();
    for call in calls {
        let recorded = session
            .store
            .audit_tool_call(
                &session.opts.agent,
                session.id.as_str(),
                (call.id.as_str(), &call.name, &call.arguments),
                skipped.get(call.id.as_str()).map(String::as_str),
            )
            .await;
        if let Err(err) = recorded {
            unrecorded.insert(
                call.id.as_str().to_owned(),
                format!("the call could not be recorded in the audit log ({err}); it did not run"),
            );
        }
    }
    let futures = calls.iter().map(|call| {
        emitter.emit(EventMsg::ToolCallBegin {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let skip = skipped
            .get(call.id.as_str())
            .or_else(|| unrecorded.get(call.id.as_str()))
            .cloned();
        async move {
            match skip {
                Some(error) => (ToolOutput::error(error), None),
                None => run_one(session, call.clone()).await,
            }
        }
    });
    let outputs = join_all(futures).await;
    let mut messages = Vec::with_capacity(calls.len());
    for (call, (output, saved_to)) in calls.iter().zip(outputs) {
        emitter.emit(EventMsg::ToolCallEnd {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: output.content.clone(),
            is_error: output.is_error,
            saved_to: saved_to.clone(),
        });
        messages.push(Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content,
            is_error: output.is_error,
        });
    }
    messages
}

async fn run_one(session: &Session, call: ToolCall) -> (ToolOutput, Option<String>) {
    let (output, untrusted) = execute(session, &call).await;
    let (mut output, saved) = keep_large(session, &call, output).await;
    // Content from outside the operator's control reaches the model fenced and checked (a
    // saved output as it came, its preview fenced like the rest).
    if let Some((source, label)) = untrusted {
        output.content = crate::fence::screen(session, &call, source, &label, output.content).await;
    }
    (output, saved)
}

/// `output`, or for one longer than `inline_output_chars` its preview and where the whole of
/// it was saved.
async fn keep_large(
    session: &Session,
    call: &ToolCall,
    output: ToolOutput,
) -> (ToolOutput, Option<String>) {
    let limit = session.opts.inline_output_chars;
    if output.content.chars().count() <= limit {
        return (output, None);
    }
    let saved = save_large_output(
        session.opts.workspace.clone(),
        session.id.as_str(),
        call,
        output.content.clone(),
    )
    .await;
    match saved {
        Ok(rel) => {
            let preview = preview(&output.content, &rel);
            (
                ToolOutput {
                    content: preview,
                    is_error: output.is_error,
                },
                Some(rel),
            )
        }
        // Saving failed (the workspace is the agent's: a planted link or file refuses it): the
        // model still gets a bounded output rather than nothing.
        Err(err) => {
            let head: String = output.content.chars().take(limit).collect();
            (
                ToolOutput {
                    content: format!(
                        "{head}\n[... output truncated at {limit} characters; saving the full \
                         output failed: {err} ...]"
                    ),
                    is_error: output.is_error,
                },
                None,
            )
        }
    }
}

/// The call's output (secrets redacted), and when its content comes from outside the
/// operator's control, its source and label for the fence.
async fn execute(
    session: &Session,
    call: &ToolCall,
) -> (ToolOutput, Option<(ContentSource, String)>) {
    let tool = session.tools.get(&call.name);
    let args = match parse_arguments(call) {
        Ok(args) => args,
        Err(error) if tool.is_some() => return (error, None),
        Err(_) => serde_json::Value::Null,
    };
    // The tool itself, then what this call of it needs; a tool the agent may not call is
    // refused as such even when it does not exist here.
    if let Some(rights) = &session.rights {
        let mut needs = vec![Need::Tool(call.name.clone())];
        if let Some(tool) = &tool {
            needs.extend(tool.needs(&args));
        }
        let call_ref = (call.id.as_str(), call.name.as_str());
        if let Err(Refused(why)) = rights
            .check(&session.store, &session.opts.agent, call_ref, &needs)
            .await
        {
            return (ToolOutput::error(format!("denied: {why}")), None);
        }
    }
    let Some(tool) = tool else {
        let unknown = ToolOutput::error(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            session.tools.names().join(", ")
        ));
        return (unknown, None);
    };
    // What leaves this machine is looked at first.
    let args = match crate::egress::screen(session, call, tool.as_ref(), args).await {
        Ok(args) => args,
        Err(refused) => return (refused, None),
    };
    let ctx = ToolContext {
        workspace: session.opts.workspace.clone(),
        session_id: session.id.clone(),
        call_id: call.id.clone(),
        read_only: session.skill_folders(),
    };
    let untrusted = tool
        .content_source()
        .map(|source| (source, crate::fence::label(&call.name, &args)));
    let mut output = spawn_tool(tool, ctx, args).await;
    // Before anything stores, saves or sends it: no secret value a call used survives.
    output.content = session.tools.redact(&output.content);
    (output, untrusted)
}

/// The call's arguments as a JSON object, or the error result that tells the model how to fix
/// them.
fn parse_arguments(call: &ToolCall) -> Result<serde_json::Value, ToolOutput> {
    let raw = call.arguments.trim();
    let args = if raw.is_empty() {
        Ok(serde_json::Value::Object(serde_json::Map::new()))
    } else {
        serde_json::from_str::<serde_json::Value>(raw)
    };
    match args {
        Ok(args @ serde_json::Value::Object(_)) => Ok(args),
        Ok(other) => Err(ToolOutput::error(format!(
            "arguments for `{}` must be a JSON object, got: {other}",
            call.name
        ))),
        Err(err) => Err(ToolOutput::error(format!(
            "arguments for `{}` are not valid JSON ({err}); resend the call with a JSON object",
            call.name
        ))),
    }
}

/// Runs the tool on its own task so a panic becomes an error result instead of ending the
/// turn; the task is aborted (and its processes killed) if the turn is dropped.
async fn spawn_tool(tool: Arc<dyn Tool>, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
    let name = tool.spec().name;
    let task = AbortOnDrop(tokio::spawn(async move { tool.call(&ctx, args).await }));
    match task.await {
        Ok(Ok(text)) => ToolOutput::ok(text),
        Ok(Err(err)) => ToolOutput::error(err.to_string()),
        Err(join) => ToolOutput::error(format!("tool `{name}` crashed: {join}")),
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// Saves a large output under `.reef/tool-outputs/<session>/` and returns its
/// workspace-relative path. The directories are created beneath the workspace one name at a
/// time without following a link, and the file only if nothing is there yet (`O_EXCL`), so
/// nothing the agent planted can redirect the write.
async fn save_large_output(
    workspace: PathBuf,
    session: &str,
    call: &ToolCall,
    content: String,
) -> Result<String, String> {
    // Every component comes from outside (the model names tools and ids): keep it a plain name.
    let dir = format!(".reef/tool-outputs/{}", file_name_part(session));
    let name = format!(
        "{}-{}.txt",
        file_name_part(&call.name),
        file_name_part(call.id.as_str())
    );
    let task = tokio::task::spawn_blocking(move || -> Result<String, WorkspaceError> {
        let ws = Workspace::open(&workspace)?;
        let dir = ws.resolve(&dir)?;
        ws.create_dir_all(&dir)?;
        let file = ws.resolve(&format!("{dir}/{name}"))?;
        ws.create_new(&file, content.as_bytes())?;
        Ok(file.display())
    });
    match task.await {
        Ok(saved) => saved.map_err(|err| err.to_string()),
        Err(join) => Err(format!("the save crashed: {join}")),
    }
}

/// `text` reduced to `[A-Za-z0-9_-]`, at most 64 characters, never empty.
fn file_name_part(text: &str) -> String {
    let part: String = text
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if part.is_empty() {
        "_".to_owned()
    } else {
        part
    }
}

fn preview(content: &str, rel: &str) -> String {
    let total = content.chars().count();
    let lines = content.lines().count();
    let head: String = content.chars().take(PREVIEW_CHARS).collect();
    format!(
        "{head}\n[... output is {total} characters ({lines} lines); the full output was saved to \
         {rel} in the workspace. Use read_file with start_line/end_line to read more ...]"
    )
}
