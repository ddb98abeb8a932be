//! Chat templates: the Jinja template stored in the GGUF (`tokenizer.chat_template`), rendered
//! with minijinja into the prompt text, with reef's tool-call protocol for templates that have
//! none of their own.

use crate::protocol;
use minijinja::{Environment, ErrorKind, Value, context};
use reef_core::{Message, ToolSpec};
use serde::Serialize;

/// ChatML, used when a GGUF carries no template of its own.
const CHATML: &str = "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A model's chat template, compiled once.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The template renders `tools` itself (it mentions them); otherwise reef describes the
    /// tools and the call format in the system message.
    native_tools: bool,
    bos: String,
    eos: String,
}

#[derive(Serialize)]
struct TemplateMessage {
    role: &'static str,
    content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<TemplateToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
}

#[derive(Serialize)]
struct TemplateToolCall {
    id: String,
    r#type: &'static str,
    function: TemplateFunction,
}

#[derive(Serialize)]
struct TemplateFunction {
    name: String,
    /// An object, as templates expect (`arguments | tojson`).
    arguments: serde_json::Value,
}

impl ChatTemplate {
    /// Compiles `source` (None: ChatML). `bos`/`eos` are the model's special token texts.
    pub fn new(source: Option<&str>, bos: &str, eos: &str) -> Result<Self, minijinja::Error> {
        let source = source.filter(|s| !s.trim().is_empty()).unwrap_or(CHATML);
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        // Templates use it for "today's date". The date is taken once, when the template is
        // compiled, so prompts stay identical (and the KV cache reusable) between rounds.
        let today = Date::today();
        env.add_function("strftime_now", move |format: String| -> String {
            today.format(&format)
        });
        env.add_template_owned("chat", source.to_owned())?;
        Ok(Self {
            native_tools: source.contains("tools"),
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        })
    }

    /// Whether the template renders tool definitions itself.
    pub fn native_tools(&self) -> bool {
        self.native_tools
    }

    /// The prompt for `messages` and `tools`, ending where the assistant's reply starts.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<String, minijinja::Error> {
        let mut rendered: Vec<TemplateMessage> = messages.iter().map(to_template).collect();
        let tool_values: Vec<serde_json::Value> = tools.iter().map(protocol::tool_json).collect();
        if !tools.is_empty() && !self.native_tools {
            let instructions = protocol::instructions(tools);
            match rendered.first_mut() {
                Some(first) if first.role == "system" => {
                    first.content = format!("{}\n\n{instructions}", first.content);
                }
                _ => rendered.insert(
                    0,
                    TemplateMessage {
                        role: "system",
                        content: instructions,
                        tool_calls: Vec::new(),
                        name: None,
                        tool_call_id: None,
                    },
                ),
            }
            // Without native support, calls and results travel as plain text.
            for m in &mut rendered {
                if m.role == "assistant" && !m.tool_calls.is_empty() {
                    let calls = std::mem::take(&mut m.tool_calls);
                    m.content = protocol::render_calls(
                        &m.content,
                        calls
                            .iter()
                            .map(|c| (c.function.name.as_str(), &c.function.arguments)),
                    );
                } else if m.role == "tool" {
                    m.role = "user";
                    m.content = protocol::render_result(&m.content);
                }
            }
        }
        let template = self.env.get_template("chat")?;
        template.render(context! {
            messages => rendered,
            tools => if tools.is_empty() { None } else { Some(tool_values) },
            add_generation_prompt => true,
            bos_token => &self.bos,
            eos_token => &self.eos,
        })
    }
}

fn to_template(message: &Message) -> TemplateMessage {
    let plain = |role, content: &str| TemplateMessage {
        role,
        content: content.to_owned(),
        tool_calls: Vec::new(),
        name: None,
        tool_call_id: None,
    };
    match message {
        Message::System { content } => plain("system", content),
        Message::User { content } => plain("user", content),
        Message::Assistant {
            content,
            tool_calls,
        } => TemplateMessage {
            tool_calls: tool_calls
                .iter()
                .map(|c| TemplateToolCall {
                    id: c.id.to_string(),
                    r#type: "function",
                    function: TemplateFunction {
                        name: c.name.clone(),
                        arguments: serde_json::from_str(&c.arguments)
                            .unwrap_or_else(|_| serde_json::Value::String(c.arguments.clone())),
                    },
                })
                .collect(),
            ..plain("assistant", content)
        },
        Message::Tool {
            call_id,
            name,
            content,
            ..
        } => TemplateMessage {
            name: Some(name.clone()),
            tool_call_id: Some(call_id.to_string()),
            ..plain("tool", content)
        },
    }
}

/// A calendar date (UTC), enough for the `strftime_now` formats chat templates use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Date {
    year: i64,
    month: u32,
    day: u32,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

impl Date {
    fn today() -> Date {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Date::from_days((secs / 86_400) as i64)
    }

    /// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
    fn from_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Date { year, month, day }
    }

    /// `%d %m %Y %y %B %b` are replaced; anything else is left as written.
    fn format(&self, format: &str) -> String {
        let name = MONTHS[(self.month as usize).saturating_sub(1) % 12];
        format
            .replace("%d", &format!("{:02}", self.day))
            .replace("%m", &format!("{:02}", self.month))
            .replace("%Y", &self.year.to_string())
            .replace("%y", &format!("{:02}", self.year.rem_euclid(100)))
            .replace("%B", name)
            .replace("%b", &name[..3])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{ToolCall, ToolCallId};

    fn conversation() -> (Vec<Message>, Vec<ToolSpec>) {
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Free disk?"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: ToolCallId::from("call_1"),
                    name: "shell".into(),
                    arguments: r#"{"command":"df -h"}"#.into(),
                }],
            },
            Message::Tool {
                call_id: ToolCallId::from("call_1"),
                name: "shell".into(),
                content: "19G free".into(),
                is_error: false,
            },
        ];
        let tools = vec![ToolSpec {
            name: "shell".into(),
            description: "Run a command".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        (messages, tools)
    }

    #[test]
    fn a_template_without_tools_gets_reef_s_protocol_as_text() {
        let template = ChatTemplate::new(None, "", "<|im_end|>").unwrap();
        assert!(!template.native_tools());
        let (messages, tools) = conversation();
        let prompt = template.render(&messages, &tools).unwrap();
        assert!(
            prompt.starts_with("<|im_start|>system\nBe brief.\n\n# Tools"),
            "{prompt}"
        );
        assert!(prompt.contains(r#""name":"shell""#), "{prompt}");
        assert!(
            prompt.contains("<|im_start|>assistant\n<tool_call>\n{\"arguments\":{\"command\":\"df -h\"},\"name\":\"shell\"}\n</tool_call><|im_end|>"),
            "{prompt}"
        );
        assert!(
            prompt.contains(
                "<|im_start|>user\n<tool_response>\n19G free\n</tool_response><|im_end|>"
            ),
            "{prompt}"
        );
        assert!(prompt.ends_with("<|im_start|>assistant\n"), "{prompt}");
    }

    #[test]
    fn a_template_with_tools_renders_them_and_sees_arguments_as_objects() {
        let source = "{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% for c in m.tool_calls %}{{ c.function.name }} {{ c.function.arguments.command }}|{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
        let template = ChatTemplate::new(Some(source), "<s>", "</s>").unwrap();
        assert!(template.native_tools());
        let (messages, tools) = conversation();
        let prompt = template.render(&messages, &tools).unwrap();
        assert_eq!(
            prompt,
            r#"[shell]<system>Be brief.<user>Free disk?<assistant>shell df -h|{"command":"df -h"}<tool>19G free<assistant>"#
        );
    }

    #[test]
    fn strftime_now_formats_the_calendar_date() {
        assert_eq!(
            Date::from_days(0),
            Date {
                year: 1970,
                month: 1,
                day: 1
            }
        );
        // 2024-02-29, a leap day; 2026-11-22.
        assert_eq!(
            Date::from_days(19_782),
            Date {
                year: 2024,
                month: 2,
                day: 29
            }
        );
        let d = Date::from_days(20_779);
        assert_eq!(
            d,
            Date {
                year: 2026,
                month: 11,
                day: 22
            }
        );
        assert_eq!(d.format("%d %b %Y"), "22 Nov 2026");
        assert_eq!(d.format("%B %d, %y (%m) %H"), "November 22, 26 (11) %H");
    }

    #[test]
    fn template_errors_are_reported_not_panicked() {
        assert!(ChatTemplate::new(Some("{% for %}"), "", "").is_err());
        let raising = ChatTemplate::new(
            Some("{{ raise_exception('roles must alternate') }}"),
            "",
            "",
        )
        .unwrap();
        let err = raising
            .render(&[Message::user("x")], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("roles must alternate"), "{err}");
    }
}
