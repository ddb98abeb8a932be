//! A server's answer as text for the model: text as is, structured content as JSON when no
//! text says it already (see `said_in_text`), images and audio saved to the workspace (the path is returned),
//! links and embedded resources by their URI.

use crate::types::{
    CallResult, Content, PromptInfo, PromptMessages, ResourceContents, ResourceInfo,
};
use base64::Engine as _;
use reef_workspace::Workspace;
use std::path::Path;

/// Where saved media go, inside the workspace.
pub const MEDIA_DIR: &str = "mcp-files";
/// The largest media block saved (decoded); larger ones are described, not saved.
const MAX_MEDIA: usize = 20 * 1024 * 1024;

/// A tool result as text. `label` names the files saved (`SERVER-TOOL`).
pub fn call_result(result: &CallResult, workspace: &Path, label: &str) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .enumerate()
        .map(|(i, block)| content(block, workspace, label, i))
        .collect();
    if let Some(structured) = &result.structured
        && !said_in_text(structured, &result.content)
    {
        parts.push(format!("structured result: {structured}"));
    }
    if parts.is_empty() {
        "(the tool returned nothing)".to_owned()
    } else {
        parts.join("\n")
    }
}

/// Whether a text block already says `structured`: it is that JSON, or `structured` is the
/// `{"result": V}` the SDKs wrap a plain return value in, and the text is V.
fn said_in_text(structured: &serde_json::Value, content: &[Content]) -> bool {
    let wrapped = structured
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get("result"));
    content.iter().any(|c| {
        let Content::Text(text) = c else { return false };
        let parsed = serde_json::from_str::<serde_json::Value>(text).ok();
        parsed.as_ref() == Some(structured)
            || wrapped.is_some_and(|v| v.as_str() == Some(text) || parsed.as_ref() == Some(v))
    })
}

/// A resource's contents as text.
pub fn resource(contents: &[ResourceContents], workspace: &Path, label: &str) -> String {
    if contents.is_empty() {
        return "(the resource is empty)".to_owned();
    }
    contents
        .iter()
        .enumerate()
        .map(|(i, c)| embedded(c, workspace, label, i))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A prompt's messages as text, one `[role]` heading each.
pub fn prompt(messages: &PromptMessages, workspace: &Path, label: &str) -> String {
    let mut out = String::new();
    if let Some(description) = &messages.description {
        out.push_str(description);
        out.push('\n');
    }
    for (i, (role, block)) in messages.messages.iter().enumerate() {
        out.push_str(&format!(
            "[{role}]\n{}\n",
            content(block, workspace, label, i)
        ));
    }
    out
}

/// A server's resources, one per line: URI, name, MIME type, description.
pub fn resource_list(server: &str, list: &[ResourceInfo]) -> String {
    if list.is_empty() {
        return format!("MCP server `{server}` lists no resources.");
    }
    let line = |r: &ResourceInfo| {
        let mut line = format!("{} ({})", r.uri, r.name);
        if let Some(mime) = &r.mime_type {
            line.push_str(&format!(" [{mime}]"));
        }
        if let Some(d) = &r.description {
            line.push_str(&format!(": {d}"));
        }
        line
    };
    list.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// A server's prompts, one per line with their arguments (`*` marks a required one).
pub fn prompt_list(server: &str, list: &[PromptInfo]) -> String {
    if list.is_empty() {
        return format!("MCP server `{server}` lists no prompts.");
    }
    let line = |p: &PromptInfo| {
        let args: Vec<String> = p
            .arguments
            .iter()
            .map(|a| format!("{}{}", a.name, if a.required { "*" } else { "" }))
            .collect();
        let mut line = format!("{}({})", p.name, args.join(", "));
        if let Some(d) = &p.description {
            line.push_str(&format!(": {d}"));
        }
        line
    };
    list.iter().map(line).collect::<Vec<_>>().join("\n") + "\n(* = required)"
}

fn content(block: &Content, workspace: &Path, label: &str, index: usize) -> String {
    match block {
        Content::Text(text) => text.clone(),
        Content::Media { data, mime_type } => save(data, mime_type, workspace, label, index),
        Content::Link { uri, name } => match name {
            Some(name) => format!("[resource {uri} ({name}): read it with mcp_read_resource]"),
            None => format!("[resource {uri}: read it with mcp_read_resource]"),
        },
        Content::Resource(contents) => embedded(contents, workspace, label, index),
    }
}

fn embedded(contents: &ResourceContents, workspace: &Path, label: &str, index: usize) -> String {
    match (&contents.text, &contents.blob) {
        (Some(text), _) => format!("[resource {}]\n{text}", contents.uri),
        (None, Some(blob)) => {
            let mime = contents
                .mime_type
                .as_deref()
                .unwrap_or("application/octet-stream");
            format!(
                "[resource {}] {}",
                contents.uri,
                save(blob, mime, workspace, label, index)
            )
        }
        (None, None) => format!("[resource {}: empty]", contents.uri),
    }
}

/// Decodes base64 `data` into a new file of the workspace's [`MEDIA_DIR`]; says where, or
/// why not.
fn save(data: &str, mime: &str, workspace: &Path, label: &str, index: usize) -> String {
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
        Ok(bytes) => bytes,
        Err(err) => return format!("[{mime} data that is not valid base64: {err}]"),
    };
    if bytes.len() > MAX_MEDIA {
        return format!("[{mime}, {} bytes: too large to save]", bytes.len());
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let safe: String = label
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let rel = format!("{MEDIA_DIR}/{safe}-{stamp}-{index}.{}", extension(mime));
    let written = Workspace::open(workspace).and_then(|ws| {
        ws.create_dir_all(&ws.resolve(MEDIA_DIR)?)?;
        ws.create_new(&ws.resolve(&rel)?, &bytes)
    });
    match written {
        Ok(()) => format!("[{mime}, {} bytes, saved to {rel}]", bytes.len()),
        Err(err) => format!("[{mime}, {} bytes, not saved: {err}]", bytes.len()),
    }
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(content: Vec<Content>, structured: serde_json::Value) -> String {
        let result = CallResult {
            content,
            structured: Some(structured),
            is_error: false,
        };
        call_result(&result, Path::new("/nonexistent"), "t")
    }

    #[test]
    fn structured_content_is_shown_once() {
        let text = |t: &str| vec![Content::Text(t.into())];
        assert_eq!(text_of(text("5"), json!({"result": 5})), "5");
        assert_eq!(text_of(text("hi"), json!({"result": "hi"})), "hi");
        assert_eq!(text_of(text(r#"{"a":1}"#), json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(
            text_of(text("sunny"), json!({"temp": 20})),
            "sunny\nstructured result: {\"temp\":20}"
        );
        assert_eq!(
            text_of(Vec::new(), json!({"temp": 20})),
            "structured result: {\"temp\":20}"
        );
    }
}
