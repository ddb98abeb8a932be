//! Recursive walks over directory descriptors: each subdirectory is opened from its parent's
//! descriptor with `O_NOFOLLOW | O_DIRECTORY`, so a walk never enters a link, and `.gitignore` /
//! `.ignore` files from the workspace root down are honoured (read the same beneath-only way).

use crate::meta::{Entry, Kind};
use crate::open::DIR_HANDLE;
use crate::{RelPath, Workspace, WorkspaceError};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{Dir, FileType, Mode, OFlags};
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

/// Directories deeper than this below the walk's start are listed but not entered.
const MAX_DEPTH: usize = 256;
/// Ignore files larger than this are not read.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;

/// What a walk leaves out, besides ignored files, links' targets and hidden paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkOptions {
    /// Leave out names starting with `.`.
    pub skip_hidden: bool,
    /// Leave out anything named `.git`.
    pub skip_git: bool,
    /// Leave out regular files larger than this many bytes.
    pub max_file_size: Option<u64>,
    /// Stop after this many entries.
    pub limit: Option<usize>,
}

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// Every entry was visited.
    Complete,
    /// More entries than [`WalkOptions::limit`] were found; the rest were not visited.
    Limited,
    /// The visitor asked to stop.
    Stopped,
}

/// The ignore rules of one directory.
struct Rules {
    ignore: Option<Gitignore>,
    git: Option<Gitignore>,
}

struct Frame {
    dir: Dir,
    entries: std::vec::IntoIter<Entry>,
}

impl Workspace {
    /// Visits everything beneath the directory `base` depth first, each directory's entries
    /// sorted by name (the base itself is not visited; a regular file as base is visited
    /// alone). Links are visited as links and never entered; ignored entries are left out
    /// with everything below them.
    pub fn walk(
        &self,
        base: &RelPath,
        options: &WalkOptions,
        mut visit: impl FnMut(&Entry) -> ControlFlow<()>,
    ) -> Result<WalkEnd, WorkspaceError> {
        let meta = self.metadata(base)?;
        let path = base.display();
        match meta.kind {
            Kind::Dir => {}
            Kind::File => {
                let entry = Entry {
                    path: base.clone(),
                    kind: meta.kind,
                    len: meta.len,
                };
                if too_big(&entry, options) || options.limit == Some(0) {
                    return Ok(WalkEnd::Complete);
                }
                return Ok(match visit(&entry) {
                    ControlFlow::Break(()) => WalkEnd::Stopped,
                    ControlFlow::Continue(()) => WalkEnd::Complete,
                });
            }
            Kind::Symlink => {
                return Err(WorkspaceError::Symlink {
                    link: path.clone(),
                    path,
                });
            }
            Kind::Other => return Err(WorkspaceError::NotRegular { path }),
        }

        let mut rules = self.ancestor_rules(base);
        let fd = self.open_dir(base)?;
        rules.push(self.rules_in(fd.as_fd(), base));
        let (dir, entries) = self.read_dir(fd, base)?;
        let mut stack = vec![Frame {
            dir,
            entries: entries.into_iter(),
        }];
        let mut visited = 0;
        while let Some(depth) = stack.len().checked_sub(1) {
            let Some(frame) = stack.last_mut() else { break };
            let Some(entry) = frame.entries.next() else {
                stack.pop();
                rules.pop();
                continue;
            };
            if !self.keeps(&entry, options, &rules) {
                continue;
            }
            if options.limit == Some(visited) {
                return Ok(WalkEnd::Limited);
            }
            visited += 1;
            if visit(&entry).is_break() {
                return Ok(WalkEnd::Stopped);
            }
            if entry.kind != Kind::Dir || depth >= MAX_DEPTH {
                continue;
            }
            // Unreadable or vanished subdirectories are left out, as a listing would.
            let Ok(parent) = frame.dir.fd() else { continue };
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let Ok(fd) = rustix::fs::openat(parent, entry.name(), flags, Mode::empty()) else {
                continue;
            };
            let child_rules = self.rules_in(fd.as_fd(), &entry.path);
            let Ok((dir, entries)) = self.read_dir(fd, &entry.path) else {
                continue;
            };
            rules.push(child_rules);
            stack.push(Frame {
                dir,
                entries: entries.into_iter(),
            });
        }
        Ok(WalkEnd::Complete)
    }

    /// The rules of every directory from the root down to `base`'s parent.
    fn ancestor_rules(&self, base: &RelPath) -> Vec<Rules> {
        let mut chain = Vec::new();
        let mut dir = base.parent();
        while let Some(d) = dir {
            dir = d.parent();
            chain.push(d);
        }
        chain
            .iter()
            .rev()
            .map(|d| match self.open_at(d, DIR_HANDLE, Mode::empty()) {
                Ok(fd) => self.rules_in(fd.as_fd(), d),
                Err(_) => Rules {
                    ignore: None,
                    git: None,
                },
            })
            .collect()
    }

    /// The `.ignore` and `.gitignore` rules of the open directory `fd`, which is `rel`.
    fn rules_in(&self, fd: BorrowedFd<'_>, rel: &RelPath) -> Rules {
        let dir = self.root.join(rel.as_path());
        Rules {
            ignore: ignore_file(fd, &dir, ".ignore"),
            git: ignore_file(fd, &dir, ".gitignore"),
        }
    }

    fn keeps(&self, entry: &Entry, options: &WalkOptions, rules: &[Rules]) -> bool {
        let name = entry.name().as_encoded_bytes();
        if options.skip_hidden && name.starts_with(b".") {
            return false;
        }
        if options.skip_git && name == b".git" {
            return false;
        }
        if too_big(entry, options) {
            return false;
        }
        let path = self.root.join(entry.path.as_path());
        !ignored(rules, &path, entry.kind == Kind::Dir)
    }
}

fn too_big(entry: &Entry, options: &WalkOptions) -> bool {
    entry.kind == Kind::File && options.max_file_size.is_some_and(|max| entry.len > max)
}

/// Whether `path` is ignored: the deepest directory whose rules match it decides, `.ignore`
/// rules before `.gitignore` ones, and a `!` rule keeps it.
fn ignored(rules: &[Rules], path: &Path, is_dir: bool) -> bool {
    let decide = |pick: fn(&Rules) -> Option<&Gitignore>| {
        rules.iter().rev().find_map(|r| {
            let matched = pick(r)?.matched(path, is_dir);
            (!matched.is_none()).then(|| matched.is_ignore())
        })
    };
    decide(|r| r.ignore.as_ref())
        .or_else(|| decide(|r| r.git.as_ref()))
        .unwrap_or(false)
}

/// The rules in the file `name` of the open directory `fd` (at `dir`, for matching): read only
/// when it is a regular file reached without a link.
fn ignore_file(fd: BorrowedFd<'_>, dir: &Path, name: &str) -> Option<Gitignore> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = rustix::fs::openat(fd, name, flags, Mode::empty()).ok()?;
    let stat = rustix::fs::fstat(&file).ok()?;
    let size = u64::try_from(stat.st_size).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || size > MAX_IGNORE_FILE {
        return None;
    }
    let mut text = String::new();
    std::fs::File::from(file)
        .take(MAX_IGNORE_FILE)
        .read_to_string(&mut text)
        .ok()?;
    let mut builder = GitignoreBuilder::new(dir);
    for line in text.lines() {
        // A malformed pattern is skipped, as git does.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}
