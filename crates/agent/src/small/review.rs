//! The review of a small model's answer: what the turn has shown it ([`Evidence`]) and why
//! an answer is sent back once ([`Nudge`]).

use super::evidence::Evidence;
use super::lookup::Files;
use super::question::{
    about_workspace, asks_for_change, asks_for_count, asks_for_name, asks_for_number,
    asks_yes_or_no, described_command, empties, line_number, outputs,
};
use super::text::{contains_word, file_names, numbers, words};
use serde_json::json;

/// Why an answer is sent back: each at most once per turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Nudge {
    /// The question is about the workspace and no tool was called.
    Unlooked,
    /// The last call failed and the answer came anyway.
    AfterFailure,
    /// The question asks for a number or a name the answer gives but no result shows.
    Unsupported,
    /// The task names a file to create or write and it does not exist.
    Missing,
    /// The answer describes a command (in backticks) instead of running it.
    Described,
    /// The question asks for yes or no and the answer says neither.
    YesNo,
    /// The task asks for a change and no call of the turn changed anything.
    Unchanged,
    /// The question asks for a name and the answer gives none, or one no result shows.
    Unnamed,
    /// A question a command answers exactly (whether a file holds a word, what line N says)
    /// answered without any command run.
    Eyeballed,
    /// A question answered right after a command that printed nothing.
    Empty,
    /// The task asks for an empty file and it holds text.
    NotEmpty,
}

impl Nudge {
    /// The message sent back (as a user message marked as reef's).
    pub(crate) fn message(self, detail: &str) -> String {
        match self {
            Nudge::Unlooked => "[reef] You answered without looking. Call a tool first to \
                 check (for example shell with cat FILE, grep WORD FILE or wc -l FILE), then \
                 answer from its result."
                .to_owned(),
            Nudge::YesNo => "[reef] The question asks for yes or no: answer with yes or no, \
                 as the tool results show."
                .to_owned(),
            Nudge::Described => format!(
                "[reef] You described a command instead of running it. Run it now: call \
                 shell with {}, then answer from its result.",
                json!({ "command": detail })
            ),
            Nudge::AfterFailure => format!(
                "[reef] Your last call failed, so the task is not done yet. Fix it with \
                 another call (see the hint in the result), then answer.{detail}"
            ),
            Nudge::Unsupported => format!(
                "[reef] {detail} Do not work it out in your head: run a command that prints \
                 it (for example cat FILE, grep, wc or awk), then answer with exactly what \
                 the result shows."
            ),
            Nudge::Unchanged => "[reef] Nothing has changed yet: your calls only looked or \
                 printed. Make the change with a call (mv, cp, rm, edit_file or write_file; to \
                 change a file with a command, write to a new file and move it over: COMMAND \
                 > tmp && mv tmp FILE), then answer."
                .to_owned(),
            Nudge::Unnamed => format!(
                "[reef] {detail} Find it with a command that prints names, for example \
                 grep -l WORD * (the files that mention WORD) or ls -S DIR | head -1 (the \
                 largest file in DIR), then answer with the name it prints."
            ),
            Nudge::Eyeballed => {
                format!("[reef] Check it with a command before answering: {detail}")
            }
            Nudge::Empty => "[reef] Your last command printed nothing, so it does not answer \
                 the question. Look with a simpler command (cat FILE, or grep WORD FILE), \
                 then answer from what it prints."
                .to_owned(),
            Nudge::NotEmpty => format!(
                "[reef] The task asks for {detail} to be empty, and it holds text. Empty it \
                 with shell: truncate -s 0 {detail}"
            ),
            Nudge::Missing => format!(
                "[reef] The task is not done: {detail} does not exist yet. Create it with a \
                 call, then answer."
            ),
        }
    }

    /// Whether the request after this nudge must call a tool (all but the yes-or-no one ask
    /// for a call).
    pub(crate) fn requires_call(self) -> bool {
        self != Nudge::YesNo
    }
}

/// The nudge `answer` to `input` earns given what the turn has shown, if any (those in
/// `given` are not repeated), with its detail text.
pub(crate) fn review(
    input: &str,
    answer: &str,
    evidence: &Evidence,
    given: &[Nudge],
    files: Files<'_>,
) -> Option<(Nudge, String)> {
    let fresh = |n: Nudge| !given.contains(&n);
    if fresh(Nudge::Described)
        && let Some(command) = described_command(answer)
    {
        return Some((Nudge::Described, command));
    }
    if evidence.calls == 0 {
        return (fresh(Nudge::Unlooked) && about_workspace(input))
            .then(|| (Nudge::Unlooked, String::new()));
    }
    if evidence.last_failed && fresh(Nudge::AfterFailure) {
        return Some((
            Nudge::AfterFailure,
            format!(" It said: {}", evidence.last_error),
        ));
    }
    if fresh(Nudge::Missing)
        && let Some(path) = outputs(input).into_iter().find(|p| files.absent(p))
    {
        return Some((Nudge::Missing, path));
    }
    if fresh(Nudge::NotEmpty)
        && let Some(path) = empties(input).into_iter().find(|p| files.holds_text(p))
    {
        return Some((Nudge::NotEmpty, path));
    }
    if fresh(Nudge::Unchanged) && asks_for_change(input) && !evidence.changed {
        return Some((Nudge::Unchanged, String::new()));
    }
    if fresh(Nudge::YesNo)
        && asks_yes_or_no(input)
        && !words(answer).any(|w| matches!(w.to_ascii_lowercase().as_str(), "yes" | "no"))
    {
        return Some((Nudge::YesNo, String::new()));
    }
    if fresh(Nudge::Eyeballed)
        && evidence.computed.is_empty()
        && about_workspace(input)
        && !asks_for_change(input)
    {
        if asks_yes_or_no(input) {
            return Some((
                Nudge::Eyeballed,
                "for example grep -w WORD FILE prints the lines that hold WORD, and no \
                 output means no. Then answer yes or no."
                    .to_owned(),
            ));
        }
        if let Some(n) = line_number(input) {
            return Some((
                Nudge::Eyeballed,
                format!(
                    "sed -n '{n}p' FILE prints line {n} alone. Then answer with what it prints."
                ),
            ));
        }
    }
    if fresh(Nudge::Empty)
        && evidence.last_printed_nothing
        && !evidence.last_changed
        && input.contains('?')
        && !asks_yes_or_no(input)
    {
        return Some((Nudge::Empty, String::new()));
    }
    let shown = |word: &str| {
        evidence.results.iter().any(|r| contains_word(r, word)) || contains_word(input, word)
    };
    if fresh(Nudge::Unsupported) && asks_for_number(input) {
        // A count is computed, not read: a number in a file's text is no count of it.
        let pool = if asks_for_count(input) {
            &evidence.computed
        } else {
            &evidence.results
        };
        let seen: Vec<String> = pool
            .iter()
            .map(String::as_str)
            .chain([input])
            .flat_map(numbers)
            .collect();
        let numbers = numbers(answer);
        if numbers.is_empty() {
            return Some((
                Nudge::Unsupported,
                "The question asks for a number and your answer gives none.".to_owned(),
            ));
        }
        if let Some(n) = numbers.iter().find(|n| !seen.contains(n)) {
            let source = if asks_for_count(input) {
                "No command's output"
            } else {
                "No tool result"
            };
            return Some((
                Nudge::Unsupported,
                format!("{source} shows the number {n} of your answer."),
            ));
        }
    }
    if fresh(Nudge::Unnamed) && asks_for_name(input) {
        let names = file_names(answer);
        if names.is_empty() && !words(answer).any(|w| files.present(w)) {
            return Some((
                Nudge::Unnamed,
                "The question asks for a name and your answer gives none.".to_owned(),
            ));
        }
        if !names.is_empty() && !names.iter().any(|n| shown(n)) {
            return Some((
                Nudge::Unnamed,
                format!(
                    "No tool result shows the name {} of your answer.",
                    names.join(", ")
                ),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn ws() -> Files<'static> {
        Files::new(Path::new("/nonexistent/reef-small-tests"), &[])
    }

    fn at(root: &Path) -> Files<'_> {
        Files::new(root, &[])
    }

    fn evidence(results: &[&str]) -> Evidence {
        let mut e = Evidence::default();
        for r in results {
            e.record("shell", "{}", r, false);
        }
        e
    }

    #[test]
    fn an_answer_about_files_without_a_call_is_sent_back_once() {
        let none = Evidence::default();
        let q = "How many lines does data.csv have?";
        assert_eq!(
            review(q, "10", &none, &[], ws()).map(|n| n.0),
            Some(Nudge::Unlooked)
        );
        assert_eq!(review(q, "10", &none, &[Nudge::Unlooked], ws()), None);
        // Not about the workspace: answered as it is.
        assert_eq!(review("What is 2+2?", "4", &none, &[], ws()), None);
        assert!(about_workspace(
            "Create the directories src/app and src/lib"
        ));
        assert!(!about_workspace("Say hello in French."));
        assert!(about_workspace("How much free disk space is there?"));
    }

    #[test]
    fn a_failed_last_call_or_non_zero_exit_sends_the_answer_back() {
        let mut e = Evidence::default();
        e.record("edit_file", "{}", "old_string not found", true);
        assert_eq!(
            review("Rename notes.md to todo.md.", "Done.", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::AfterFailure)
        );
        let mut e = Evidence::default();
        e.record(
            "shell",
            "{}",
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat",
            false,
        );
        assert!(e.last_failed);
        e.record("shell", "{}", "exit_code: 0\nstdout: (empty)", false);
        assert!(!e.last_failed, "a later success clears it");
    }

    #[test]
    fn numbers_and_names_must_appear_in_a_result() {
        let e = evidence(&["exit_code: 0\nstdout:\n13 data.csv\n"]);
        let q = "How many lines does data.csv have?";
        assert_eq!(review(q, "data.csv has 13 lines.", &e, &[], ws()), None);
        let (nudge, detail) = review(q, "It has 10 lines.", &e, &[], ws()).unwrap();
        assert_eq!(nudge, Nudge::Unsupported);
        assert!(detail.contains("10"), "{detail}");
        assert!(review(q, "It has many lines.", &e, &[], ws()).is_some());
        assert_eq!(
            review(q, "It has 10 lines.", &e, &[Nudge::Unsupported], ws()),
            None
        );
        // A number given in the question counts as shown.
        let q = "How many of the 3 files are empty?";
        assert_eq!(review(q, "3 of them.", &e, &[], ws()), None);

        let e = evidence(&["exit_code: 0\nstdout:\nc.txt\n"]);
        let q = "Which file mentions the word 'penguin'?";
        assert_eq!(review(q, "c.txt mentions it.", &e, &[], ws()), None);
        assert_eq!(
            review(q, "b.txt mentions it.", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::Unnamed)
        );
    }

    #[test]
    fn a_count_must_come_from_a_command_not_a_read() {
        let q = "How many words are in quote.txt?";
        let mut e = Evidence::default();
        e.record(
            "read_file",
            r#"{"path":"quote.txt"}"#,
            "1 one two\n12 more words",
            false,
        );
        let (nudge, detail) = review(q, "12", &e, &[], ws()).unwrap();
        assert_eq!(nudge, Nudge::Unsupported);
        assert!(
            detail.starts_with("No command's output shows the number 12"),
            "{detail}"
        );
        e.record(
            "shell",
            r#"{"command":"wc -w < quote.txt"}"#,
            "exit_code: 0\nstdout:\n11\n",
            false,
        );
        assert_eq!(review(q, "11", &e, &[], ws()), None);
        // A value looked up (not counted) may come from a read.
        let q = "What is the largest number in temps.txt?";
        let mut e = Evidence::default();
        e.record("read_file", r#"{"path":"temps.txt"}"#, "3\n41\n7\n", false);
        assert_eq!(review(q, "41", &e, &[], ws()), None);
    }

    #[test]
    fn a_change_asked_for_must_be_made() {
        let q = "Remove the duplicate lines from emails.txt, keeping the first occurrence.";
        let mut e = Evidence::default();
        e.record(
            "shell",
            r#"{"command":"sort emails.txt | uniq"}"#,
            "exit_code: 0\nstdout:\na\n",
            false,
        );
        assert!(!e.changed);
        assert_eq!(
            review(q, "The duplicates have been removed.", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::Unchanged)
        );
        assert_eq!(review(q, "Done.", &e, &[Nudge::Unchanged], ws()), None);
        e.record(
            "shell",
            r#"{"command":"awk '!seen[$0]++' emails.txt > t && mv t emails.txt"}"#,
            "exit_code: 0\nstdout: (empty)",
            false,
        );
        assert!(e.changed);
        assert_eq!(review(q, "Done.", &e, &[], ws()), None);
        // A failed write changes nothing; a question asks for no change.
        let mut e = Evidence::default();
        e.record(
            "shell",
            r#"{"command":"mv a b"}"#,
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat 'a'\n",
            false,
        );
        assert!(!e.changed);
        // An append done by a command that prints nothing answers a polite question.
        let q = "Could you append 'eggs' to shopping.txt?";
        let mut e = Evidence::default();
        e.record(
            "shell",
            r#"{"command":"echo 'eggs' >> shopping.txt"}"#,
            "exit_code: 0\nstdout: (empty)\nstderr: (empty)\n",
            false,
        );
        assert_eq!(review(q, "Appended eggs.", &e, &[], ws()), None);
    }

    #[test]
    fn a_name_asked_for_must_be_given() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Makefile"), "all:").unwrap();
        let e = evidence(&["exit_code: 0\nstdout:\nDogs bark at night.\n"]);
        let q = "Which file mentions the word 'penguin'? Answer with the file name.";
        let (nudge, detail) = review(q, "Dogs bark at night.", &e, &[], at(dir.path())).unwrap();
        assert_eq!(nudge, Nudge::Unnamed);
        assert!(detail.contains("gives none"), "{detail}");
        // A name without an extension counts when the workspace has it.
        let e = evidence(&["exit_code: 0\nstdout:\nMakefile\n"]);
        assert_eq!(review(q, "Makefile", &e, &[], at(dir.path())), None);
    }

    #[test]
    fn a_search_that_finds_nothing_is_no_failure_but_no_answer_either() {
        let mut e = Evidence::default();
        let nothing = "exit_code: 1\nstdout: (empty)\nstderr: (empty)\n";
        e.record(
            "shell",
            r#"{"command":"grep -w db-7 hosts.txt"}"#,
            nothing,
            false,
        );
        assert!(!e.last_failed, "grep says no with exit code 1");
        assert!(e.last_printed_nothing);
        let q = "Does hosts.txt contain the host 'db-7'? Answer yes or no.";
        assert_eq!(review(q, "No.", &e, &[], ws()), None);
        // A question that is not yes-or-no gets no answer from an empty output.
        let q = "What port does config.json set for the server?";
        assert_eq!(
            review(q, "No port is set.", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::Empty)
        );
        assert_eq!(
            review(q, "No port is set.", &e, &[Nudge::Empty], ws()),
            None
        );
        // Exit code 1 with an error message is a failure.
        let mut e = Evidence::default();
        e.record(
            "shell",
            r#"{"command":"mv a b"}"#,
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat 'a'\n",
            false,
        );
        assert!(e.last_failed && !e.last_printed_nothing);
    }

    #[test]
    fn a_yes_or_no_about_a_file_is_searched_not_eyeballed() {
        let q = "Does hosts.txt contain the host 'db-7'? Answer yes or no.";
        let mut e = Evidence::default();
        e.record(
            "read_file",
            r#"{"path":"hosts.txt"}"#,
            "web-1\ndb-3\n",
            false,
        );
        assert_eq!(
            review(q, "Yes", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::Eyeballed)
        );
        assert!(Nudge::Eyeballed.requires_call());
        assert_eq!(review(q, "Yes", &e, &[Nudge::Eyeballed], ws()), None);
        // A line by its number is printed, not counted off a read.
        let q = "What is written on line 3 of list.txt?";
        let (nudge, detail) = review(q, "delta", &e, &[], ws()).unwrap();
        assert_eq!(nudge, Nudge::Eyeballed);
        assert!(detail.starts_with("sed -n '3p' FILE"), "{detail}");
        // After a command, the answer stands on its result.
        e.record(
            "shell",
            r#"{"command":"sed -n '3p' list.txt"}"#,
            "exit_code: 0\nstdout:\ncharlie\n",
            false,
        );
        assert_eq!(review(q, "charlie", &e, &[], ws()), None);
    }

    #[test]
    fn a_file_asked_to_be_empty_must_be() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/app")).unwrap();
        std::fs::write(dir.path().join("src/app/main.rs"), "fn main() {}").unwrap();
        let mut e = Evidence::default();
        e.record(
            "write_file",
            r#"{"path":"src/app/main.rs"}"#,
            "wrote",
            false,
        );
        let q = "Create the directories src/app and src/lib, and an empty file src/app/main.rs.";
        assert_eq!(
            review(q, "Done.", &e, &[], at(dir.path())),
            Some((Nudge::NotEmpty, "src/app/main.rs".to_owned()))
        );
        std::fs::write(dir.path().join("src/app/main.rs"), "").unwrap();
        assert_eq!(review(q, "Done.", &e, &[], at(dir.path())), None);
        // A question about an empty file asks for nothing to be emptied.
        std::fs::write(dir.path().join("a.txt"), "text").unwrap();
        let q = "Which file is empty: a.txt or src/app/main.rs?";
        assert_ne!(
            review(q, "src/app/main.rs", &e, &[], at(dir.path())).map(|n| n.0),
            Some(Nudge::NotEmpty)
        );
    }

    #[test]
    fn a_file_the_task_asks_for_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = evidence(&["exit_code: 0\nstdout:\n7 words.txt\n"]);
        let q = "Count the lines of words.txt and write that number to count.txt.";
        assert_eq!(
            review(q, "It has 7 lines.", &e, &[], at(dir.path())),
            Some((Nudge::Missing, "count.txt".to_owned()))
        );
        std::fs::write(dir.path().join("count.txt"), "7").unwrap();
        e.record(
            "write_file",
            r#"{"path":"count.txt"}"#,
            "wrote 1 byte",
            false,
        );
        assert_eq!(review(q, "Done.", &e, &[], at(dir.path())), None);
        // Not looked up through a link the agent planted.
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let q = "Write the count to out/count.txt.";
        // Positive control: through the link the file is missing, which would earn a note.
        assert!(dir.path().join("out/count.txt").symlink_metadata().is_err());
        assert!(!at(dir.path()).absent("out/count.txt"));
        assert_eq!(review(q, "Done.", &e, &[], at(dir.path())), None);
        assert_eq!(outputs("Rename notes.md to todo.md."), ["todo.md"]);
        assert!(outputs("Copy ../x.txt to /etc/y.txt").is_empty());
    }

    #[test]
    fn a_described_command_is_sent_back_to_be_run() {
        let answer = "To find the sum, you can use the shell command `awk '{s+=$1} END \
                      {print s}' numbers.txt`.";
        let (nudge, command) = review(
            "What is the sum of numbers.txt?",
            answer,
            &Evidence::default(),
            &[],
            ws(),
        )
        .unwrap();
        assert_eq!(nudge, Nudge::Described);
        assert_eq!(command, "awk '{s+=$1} END {print s}' numbers.txt");
        assert!(
            nudge
                .message(&command)
                .contains(r#"{"command":"awk '{s+=$1}"#)
        );
        assert_eq!(described_command("Use `ls` or `the file`."), None);
        assert_eq!(outputs("Delete the file old.log."), Vec::<String>::new());
        assert_eq!(
            outputs("Create an empty file src/main.rs."),
            ["src/main.rs"]
        );
        let e = evidence(&["exit_code: 0\nstdout:\nweb-1\n"]);
        let q = "Does hosts.txt contain db-7? Answer yes or no.";
        assert_eq!(
            review(q, "web-1", &e, &[], ws()).map(|n| n.0),
            Some(Nudge::YesNo)
        );
        assert!(!Nudge::YesNo.requires_call());
        assert_eq!(review(q, "No.", &e, &[], ws()), None);
    }
}
