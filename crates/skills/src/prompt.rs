//! The system prompt's section on skills: each skill's name and description only (progressive
//! disclosure: the instructions come through the `skill` tool), within a character budget.

use crate::catalog::Catalog;

const HEADER: &str = "## Skills\nSkills are folders of instructions, scripts and references for \
    particular tasks. When a task matches a skill below, first call the `skill` tool with its \
    name to load its instructions, then follow them.\n";

/// The section for `catalog`, at most `max_chars` characters; `None` when there is no skill or
/// not even the header fits.
pub fn section(catalog: &Catalog, max_chars: usize) -> Option<String> {
    let lines: Vec<String> = catalog
        .active()
        .map(|s| {
            format!(
                "- {}: {}\n",
                s.manifest.name,
                one_line(&s.manifest.description)
            )
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let more = |rest: usize| {
        format!(
            "- … and {rest} more (skills.prompt_max_chars is reached); call `skill` with any \
             name to see them all\n"
        )
    };
    let len = |s: &str| s.chars().count();
    let mut shown = lines.len();
    loop {
        let rest = lines.len() - shown;
        let total = len(HEADER)
            + lines[..shown].iter().map(|l| len(l)).sum::<usize>()
            + if rest > 0 { len(&more(rest)) } else { 0 };
        if total <= max_chars {
            break;
        }
        if shown == 0 {
            return None;
        }
        shown -= 1;
    }
    let mut out = HEADER.to_owned();
    for line in &lines[..shown] {
        out.push_str(line);
    }
    if shown < lines.len() {
        out.push_str(&more(lines.len() - shown));
    }
    Some(out.trim_end().to_owned())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
