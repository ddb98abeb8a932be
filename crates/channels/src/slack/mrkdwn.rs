//! Slack's mrkdwn, both ways. Out: an agent's Markdown with `&`, `<` and `>` escaped (so no
//! `<!channel>` or `<@U…>` an agent writes pings anyone), `**bold**` as `*bold*`,
//! `~~struck~~` as `~struck~`, `# headings` as bold lines and `[text](https://…)` as
//! `<https://…|text>`; code blocks kept as they are, but escaped. In: Slack's escapes
//! undone, so a model reads `a < b` as written.

/// `markdown` as Slack's mrkdwn.
pub fn from_markdown(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            out.push(escape(line));
            continue;
        }
        if in_fence {
            out.push(escape(line));
            continue;
        }
        let heading = line.trim_start_matches('#');
        let line =
            if heading.len() < line.len() && heading.starts_with(' ') && line.starts_with('#') {
                format!("**{}**", heading.trim())
            } else {
                line.to_owned()
            };
        out.push(inline(&line));
    }
    out.join("\n")
}

/// One line outside code: links, then emphasis on the escaped rest.
fn inline(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some((label, url, after)) = link_at(&rest[open..]) else {
            out.push_str(&emphasis(&escape(&rest[..=open])));
            rest = &rest[open + 1..];
            continue;
        };
        out.push_str(&emphasis(&escape(&rest[..open])));
        let label = escape(label).replace('|', "/");
        out.push_str(&format!("<{url}|{label}>"));
        rest = after;
    }
    out.push_str(&emphasis(&escape(rest)));
    out
}

/// `[label](url)` at the start of `text`, for an http(s) URL without `>`, `|` or spaces: the
/// label, the URL and what follows.
fn link_at(text: &str) -> Option<(&str, &str, &str)> {
    let close = text.find("](")?;
    let label = &text[1..close];
    let after_label = &text[close + 2..];
    let end = after_label.find(')')?;
    let url = &after_label[..end];
    let fine = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.contains(['>', '|', ' ', '<'])
        && !label.contains(['[', ']']);
    fine.then(|| (label, url, &after_label[end + 1..]))
}

/// `**x**` → `*x*`, `~~x~~` → `~x~`.
fn emphasis(text: &str) -> String {
    text.replace("**", "*").replace("~~", "~")
}

/// Escapes what Slack reads as markup: `&`, `<`, `>`.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Undoes Slack's escapes in text it delivered.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn_and_markup_is_escaped() {
        assert_eq!(from_markdown("**bold** and ~~gone~~"), "*bold* and ~gone~");
        assert_eq!(from_markdown("# Title\ntext"), "*Title*\ntext");
        assert_eq!(
            from_markdown("see [the docs](https://example.org/a?b=1&c=2) now"),
            "see <https://example.org/a?b=1&c=2|the docs> now"
        );
        // An agent cannot ping the channel or a person, nor smuggle a link.
        assert_eq!(
            from_markdown("<!channel> hi <@U123> & [x](javascript:alert) [y](https://a|b)"),
            "&lt;!channel&gt; hi &lt;@U123&gt; &amp; [x](javascript:alert) [y](https://a|b)"
        );
        assert_eq!(
            from_markdown("```\nif a < b && **c** {}\n```"),
            "```\nif a &lt; b &amp;&amp; **c** {}\n```"
        );
        assert_eq!(
            unescape("a &lt; b &amp;&amp; c &gt; d &amp;lt;"),
            "a < b && c > d &lt;"
        );
    }
}
