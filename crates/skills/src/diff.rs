//! The diff `reef skills update` shows before it replaces an installed skill.

use crate::folder::{MAX_READ, SkillDir};
use crate::lock::{Change, ChangeKind};
use reef_tools::looks_binary;
use similar::TextDiff;

/// A unified diff of each changed path between the installed folder `old` and the fetched
/// `new` (binary files and folders are named, not shown).
pub(crate) fn folders(old: &SkillDir, new: &SkillDir, changes: &[Change]) -> String {
    let mut out = String::new();
    for change in changes {
        let read = |dir: &SkillDir| match change.kind {
            ChangeKind::Added if std::ptr::eq(dir, old) => Some(Vec::new()),
            ChangeKind::Removed if std::ptr::eq(dir, new) => Some(Vec::new()),
            _ => dir.read(&change.path, MAX_READ).ok(),
        };
        let (Some(a), Some(b)) = (read(old), read(new)) else {
            out.push_str(&format!("{change}: a folder or a file too large to show\n"));
            continue;
        };
        if looks_binary(&a) || looks_binary(&b) {
            out.push_str(&format!("{change}: binary file\n"));
            continue;
        }
        let (a, b) = (String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        let diff = TextDiff::from_lines(a.as_ref(), b.as_ref());
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{}", change.path), &format!("b/{}", change.path))
                .to_string(),
        );
    }
    out
}
