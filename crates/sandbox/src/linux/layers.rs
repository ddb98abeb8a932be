//! The part of a sandbox's view that depends on the request: the workspace and the writable
//! paths bound read-write, the request's read-only paths bound read-only, hidden paths masked, and the workspace files that make the host run
//! code (`reef.toml`, `.git/hooks`, `.git/config`) bound read-only. Layers are applied
//! shallowest path first, so a workspace inside a hidden directory is mounted on top of that
//! directory's mask (and nothing else of it shows), while a hidden path inside the workspace
//! is masked on top of the workspace. Every mount point is opened beneath the new root without
//! following a link (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`) and mounted
//! through its descriptor, so a command racing the set-up cannot point a mount elsewhere.

use nix::mount::{MsFlags, mount};
use rustix::fs::{Mode, OFlags, ResolveFlags, mkdirat, openat, openat2};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::as_root::Trees;
use crate::hidden::READ_ONLY_IN_WORKSPACE as READ_ONLY;
/// Pinned in place (bound onto itself) so that it cannot be renamed away and replaced while
/// its read-only parts are mounted.
const PINNED: &str = ".git";

/// What one layer does, in the order layers at the same depth are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// Hide: an empty read-only tmpfs over a directory, `/dev/null` over anything else.
    Mask,
    /// Bind the host path here read-write (the workspace, `sandbox.writable`).
    Bind,
    /// Bind the host path here read-only (a skill's folder outside the workspace).
    BindReadOnly,
    /// Bind a workspace directory onto itself, read-write.
    Pin,
    /// Bind a workspace file or directory onto itself, read-only.
    ReadOnly,
}

/// One mount of the plan, at `path` (absolute, as the command sees it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layer {
    pub path: PathBuf,
    pub kind: Kind,
}

/// The layers for a workspace, further writable paths, read-only host paths and hidden paths,
/// in the order they must be applied. A writable or read-only path inside the workspace is left
/// out (it is visible already, and binding it would resolve a path the command controls), and
/// so is a read-only file beneath a hidden path.
pub(crate) fn plan(
    workspace: &Path,
    writable: &[PathBuf],
    read_only: &[PathBuf],
    hidden: &[PathBuf],
) -> Vec<Layer> {
    let mut layers = vec![Layer {
        path: workspace.to_path_buf(),
        kind: Kind::Bind,
    }];
    for path in writable.iter().filter(|p| !p.starts_with(workspace)) {
        layers.push(Layer {
            path: path.clone(),
            kind: Kind::Bind,
        });
    }
    // One inside the workspace is visible already, unless a hidden path masks it there.
    let shown = |p: &&PathBuf| !p.starts_with(workspace) || hidden.iter().any(|h| p.starts_with(h));
    for path in read_only.iter().filter(shown) {
        layers.push(Layer {
            path: path.clone(),
            kind: Kind::BindReadOnly,
        });
    }
    for path in hidden {
        layers.push(Layer {
            path: path.clone(),
            kind: Kind::Mask,
        });
    }
    // Every directory between a writable root and a hidden path inside it is pinned (bound onto
    // itself), so the command cannot rename it and carry the hidden path out from under its
    // mask to a name the next run would not mask.
    let roots: Vec<PathBuf> = layers
        .iter()
        .filter(|l| l.kind == Kind::Bind)
        .map(|l| l.path.clone())
        .collect();
    for h in hidden {
        for root in roots.iter().filter(|r| h.starts_with(r) && h != *r) {
            for ancestor in h.ancestors().skip(1).take_while(|a| *a != root.as_path()) {
                layers.push(Layer {
                    path: ancestor.to_path_buf(),
                    kind: Kind::Pin,
                });
            }
        }
    }
    let masked = |p: &Path| {
        hidden
            .iter()
            .any(|h| h.starts_with(workspace) && h != workspace && p.starts_with(h))
    };
    let pinned = workspace.join(PINNED);
    if !masked(&pinned) {
        layers.push(Layer {
            path: pinned,
            kind: Kind::Pin,
        });
    }
    for rel in READ_ONLY {
        let path = workspace.join(rel);
        if !masked(&path) {
            layers.push(Layer {
                path,
                kind: Kind::ReadOnly,
            });
        }
    }
    layers.sort_by_key(|l| (l.path.components().count(), l.kind));
    layers.dedup_by(|a, b| a.path == b.path && a.kind == b.kind);
    layers
}

/// Applies `layers` to the view being built at `base` (not yet the root). Masks that have
/// something bound beneath them stay writable until [`seal`] makes them read-only.
pub(crate) fn apply(
    base: &Path,
    layers: &[Layer],
    trees: Option<&Trees>,
) -> Result<Vec<PathBuf>, String> {
    let root = rustix::fs::open(
        base,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open the sandbox root {}: {e}", base.display()))?;
    let mut open_masks = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let rel = relative(&layer.path);
        match layer.kind {
            Kind::Mask => {
                let holds_binds = layers[i + 1..].iter().any(|l| {
                    matches!(l.kind, Kind::Bind | Kind::BindReadOnly)
                        && l.path != layer.path
                        && l.path.starts_with(&layer.path)
                });
                if holds_binds {
                    let (parent, name) = ensure_parent(root.as_fd(), rel, 0o755)?;
                    let dir = ensure_child(parent.as_fd(), name, true, 0o755, &layer.path)?;
                    mount_tmpfs(&dir, "mode=0111,size=64k", false, &layer.path)?;
                    open_masks.push(layer.path.clone());
                } else {
                    mask(root.as_fd(), rel, &layer.path)?;
                }
            }
            Kind::Bind | Kind::BindReadOnly => {
                let read_only = layer.kind == Kind::BindReadOnly;
                let tree = trees.and_then(|t| t.get(&layer.path));
                bind_host(root.as_fd(), rel, &layer.path, &open_masks, read_only, tree)?;
            }
            Kind::Pin => self_bind(root.as_fd(), rel, &layer.path, false)?,
            Kind::ReadOnly => self_bind(root.as_fd(), rel, &layer.path, true)?,
        }
    }
    Ok(open_masks)
}

/// Makes the masks that hold bound paths read-only, now that everything is mounted in them.
pub(crate) fn seal(base: &Path, masks: &[PathBuf]) -> Result<(), String> {
    let root = rustix::fs::open(
        base,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open the sandbox root {}: {e}", base.display()))?;
    for path in masks {
        let top = beneath(root.as_fd(), relative(path), OFlags::DIRECTORY)
            .map_err(|e| format!("reopen the mask of {}: {e}", path.display()))?;
        mount(
            None::<&str>,
            fd_path(&top).as_str(),
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0111"),
        )
        .map_err(|e| format!("make the mask of {} read-only: {e}", path.display()))?;
    }
    Ok(())
}

/// The path without its leading `/`, as `openat2` beneath the root wants it.
fn relative(path: &Path) -> &Path {
    path.strip_prefix("/").unwrap_or(path)
}

/// `/proc/self/fd/N`: mounting onto it mounts onto the very file the descriptor holds.
fn fd_path(fd: impl AsFd) -> String {
    format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())
}

/// Opens the host path `shown` as an `O_PATH` descriptor. reef resolved it (it has no link
/// in it): a link now means something changed it meanwhile, and it is refused rather than
/// followed. `None` when it does not exist on this host.
pub(crate) fn open_host(shown: &Path) -> Result<Option<OwnedFd>, String> {
    let host_root = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("open / to mount {}: {e}", shown.display()))?;
    match beneath(host_root.as_fd(), relative(shown), OFlags::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP) => Err(format!(
            "{} was replaced by a symbolic link while the sandbox was being built",
            shown.display()
        )),
        Err(e) => Err(format!("open {} to mount it: {e}", shown.display())),
    }
}

/// Opens `rel` beneath `root` as an `O_PATH` descriptor without following any link.
fn beneath(root: BorrowedFd<'_>, rel: &Path, extra: OFlags) -> rustix::io::Result<OwnedFd> {
    openat2(
        root,
        rel,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC | extra,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
}

/// Opens (creating as directories with `mode` where missing) every component of `rel` but the
/// last, beneath `root`, without following links. Returns the parent and the last name.
fn ensure_parent<'a>(
    root: BorrowedFd<'_>,
    rel: &'a Path,
    mode: u32,
) -> Result<(OwnedFd, &'a OsStr), String> {
    let names: Vec<&OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(format!("{} is not a plain absolute path", rel.display())),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = names.split_last() else {
        return Err("cannot mount over the sandbox root itself".into());
    };
    let mut dir = beneath(root, Path::new("."), OFlags::DIRECTORY)
        .map_err(|e| format!("open the sandbox root: {e}"))?;
    for (depth, name) in dirs.iter().enumerate() {
        let shown = || names[..=depth].iter().collect::<PathBuf>();
        dir = ensure_child(dir.as_fd(), name, true, mode, &shown())?;
    }
    Ok((dir, last))
}

/// Opens `name` in `dir` without following a link, creating it (a directory or an empty file)
/// when it is missing.
fn ensure_child(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    is_dir: bool,
    mode: u32,
    shown: &Path,
) -> Result<OwnedFd, String> {
    let open = || {
        let kind = if is_dir {
            OFlags::DIRECTORY
        } else {
            OFlags::empty()
        };
        openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC | kind,
            Mode::empty(),
        )
    };
    match open() {
        Ok(fd) => return Ok(fd),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(format!("open /{}: {e}", shown.display())),
    }
    let created = if is_dir {
        mkdirat(dir, name, Mode::from_raw_mode(mode)).map(drop)
    } else {
        openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map(drop)
    };
    match created {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(format!("create /{}: {e}", shown.display())),
    }
    open().map_err(|e| format!("open /{}: {e}", shown.display()))
}

/// Hides what is at `rel`, if anything: a directory under an empty read-only tmpfs, anything
/// else under `/dev/null`. A path that is missing or runs through a link is left alone; the
/// place a link leads to is in the hidden list on its own.
fn mask(root: BorrowedFd<'_>, rel: &Path, shown: &Path) -> Result<(), String> {
    let fd = match beneath(root, rel, OFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => return Ok(()),
        Err(e) => return Err(format!("open {} to hide it: {e}", shown.display())),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("stat {}: {e}", shown.display()))?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    if kind == rustix::fs::FileType::Symlink {
        Ok(()) // the link itself holds nothing; where it leads is masked on its own
    } else if kind == rustix::fs::FileType::Directory {
        mount_tmpfs(&fd, "mode=0,size=4k", true, shown)
    } else {
        mount(
            Some("/dev/null"),
            fd_path(&fd).as_str(),
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("hide {}: {e}", shown.display()))
    }
}

fn mount_tmpfs(
    target: &OwnedFd,
    options: &str,
    read_only: bool,
    shown: &Path,
) -> Result<(), String> {
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if read_only {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(
        Some("tmpfs"),
        fd_path(target).as_str(),
        Some("tmpfs"),
        flags,
        Some(options),
    )
    .map_err(|e| format!("hide {}: {e}", shown.display()))
}

/// Binds the host path `shown` (trusted: the workspace, resolved once by reef, a configured
/// writable path or a skill's folder) at the same place in the view, read-write or `read_only`.
fn bind_host(
    root: BorrowedFd<'_>,
    rel: &Path,
    shown: &Path,
    open_masks: &[PathBuf],
    read_only: bool,
    tree: Option<BorrowedFd<'_>>,
) -> Result<(), String> {
    // A root helper opened the path already, idmapped (`as_root`): mount that tree instead.
    let opened;
    let source = match tree {
        Some(tree) => tree,
        None => match open_host(shown)? {
            Some(fd) => {
                opened = fd;
                opened.as_fd()
            }
            None => return Ok(()), // a configured path absent on this host
        },
    };
    let stat = rustix::fs::fstat(source).map_err(|e| format!("stat {}: {e}", shown.display()))?;
    let is_dir =
        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory;
    // Directories created inside a mask are traversable only, like the mask itself.
    let mode = if open_masks.iter().any(|m| shown.starts_with(m)) {
        0o111
    } else {
        0o755
    };
    let (parent, name) = ensure_parent(root, rel, mode)?;
    let target = ensure_child(parent.as_fd(), name, is_dir, mode, shown)?;
    if tree.is_some() {
        attach_fd(source, target.as_fd(), shown)?;
    } else {
        mount(
            Some(fd_path(source).as_str()),
            fd_path(&target).as_str(),
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| format!("bind {}: {e}", shown.display()))?;
    }
    remount(parent.as_fd(), name, read_only, shown)
}

/// Mounts the detached tree `tree` (see `as_root`) on the file or directory `target`.
pub(crate) fn attach(tree: BorrowedFd<'_>, target: &Path, shown: &Path) -> Result<(), String> {
    let target = rustix::fs::open(
        target,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        format!(
            "open {} to mount {}: {e}",
            target.display(),
            shown.display()
        )
    })?;
    attach_fd(tree, target.as_fd(), shown)
}

fn attach_fd(tree: BorrowedFd<'_>, target: BorrowedFd<'_>, shown: &Path) -> Result<(), String> {
    rustix::mount::move_mount(
        tree,
        "",
        target,
        "",
        rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH
            | rustix::mount::MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(|e| format!("mount {}: {e}", shown.display()))
}

/// Binds a path of the view onto itself (`read_only` or not). Missing, or reached through a
/// link: nothing to protect. `.git/hooks` is created when `.git` exists without it, so that
/// hooks cannot be added.
fn self_bind(
    root: BorrowedFd<'_>,
    rel: &Path,
    shown: &Path,
    read_only: bool,
) -> Result<(), String> {
    let Some((parent_rel, name)) = rel.parent().zip(rel.file_name()) else {
        return Ok(());
    };
    let parent = match beneath(root, parent_rel, OFlags::DIRECTORY) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Ok(()),
        Err(e) => return Err(format!("open {}: {e}", shown.display())),
    };
    let opened = openat(
        parent.as_fd(),
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let target = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) if name.as_bytes() == b"hooks" => {
            ensure_child(parent.as_fd(), name, true, 0o755, shown)?
        }
        Err(Errno::NOENT | Errno::LOOP) => return Ok(()),
        Err(e) => return Err(format!("open {}: {e}", shown.display())),
    };
    let stat = rustix::fs::fstat(&target).map_err(|e| format!("stat {}: {e}", shown.display()))?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    match kind {
        rustix::fs::FileType::Directory | rustix::fs::FileType::RegularFile => {}
        // A link (O_NOFOLLOW opened the link itself), device, FIFO or socket: not the file the
        // host would act on, so there is nothing to protect.
        _ => return Ok(()),
    }
    if kind != rustix::fs::FileType::Directory && !read_only {
        return Ok(()); // only directories are pinned (`.git` as a file is a worktree pointer)
    }
    mount(
        Some(fd_path(&target).as_str()),
        fd_path(&target).as_str(),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| format!("bind {} onto itself: {e}", shown.display()))?;
    remount(parent.as_fd(), name, read_only, shown)
}

/// Sets the flags of the mount now at `name` in `parent` (a mount point cannot be renamed,
/// so reopening it by name reaches the new mount): no set-uid, no devices, read-only when
/// asked, and whatever flags the host locked on the mount it came from.
fn remount(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    read_only: bool,
    shown: &Path,
) -> Result<(), String> {
    let top = openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("reopen {} after mounting it: {e}", shown.display()))?;
    let path = fd_path(&top);
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if read_only {
        flags |= MsFlags::MS_RDONLY;
    }
    flags |= super::mounts::locked_flags(Path::new(&path));
    mount(
        None::<&str>,
        path.as_str(),
        None::<&str>,
        flags,
        None::<&str>,
    )
    .map_err(|e| format!("remount {}: {e}", shown.display()))
}

#[cfg(test)]
mod tests {
    use super::{Kind, Layer, plan};
    use std::path::PathBuf;

    /// Each layer as (path, kind), in the order the plan applies them.
    fn order(layers: &[Layer]) -> Vec<(&str, Kind)> {
        layers
            .iter()
            .map(|l| (l.path.to_str().unwrap(), l.kind))
            .collect()
    }

    fn layer(path: &str, kind: Kind) -> Layer {
        Layer {
            path: PathBuf::from(path),
            kind,
        }
    }

    #[test]
    fn a_workspace_inside_a_hidden_home_is_bound_over_its_mask() {
        let layers = plan(
            "/h/.reef/agents/a/workspace".as_ref(),
            &[],
            &[],
            &[PathBuf::from("/h/.reef"), PathBuf::from("/h/.ssh")],
        );
        assert_eq!(
            layers,
            vec![
                layer("/h/.reef", Kind::Mask),
                layer("/h/.ssh", Kind::Mask),
                layer("/h/.reef/agents/a/workspace", Kind::Bind),
                layer("/h/.reef/agents/a/workspace/.git", Kind::Pin),
                layer("/h/.reef/agents/a/workspace/reef.toml", Kind::ReadOnly),
                layer("/h/.reef/agents/a/workspace/.git/hooks", Kind::ReadOnly),
                layer("/h/.reef/agents/a/workspace/.git/config", Kind::ReadOnly),
            ]
        );
    }

    #[test]
    fn a_hidden_path_inside_the_workspace_is_masked_over_it() {
        let layers = plan(
            "/home/u".as_ref(),
            &[PathBuf::from("/home/u/build"), PathBuf::from("/cache")],
            &[],
            &[PathBuf::from("/home/u/.ssh"), PathBuf::from("/home/u/.git")],
        );
        assert_eq!(
            order(&layers),
            vec![
                ("/cache", Kind::Bind),
                ("/home/u", Kind::Bind),
                ("/home/u/.ssh", Kind::Mask),
                ("/home/u/.git", Kind::Mask),
                ("/home/u/reef.toml", Kind::ReadOnly),
            ],
            "the writable path inside the workspace is left out, and nothing is bound \
             beneath a masked .git"
        );
    }

    #[test]
    fn a_read_only_folder_inside_a_hidden_home_is_bound_read_only_over_its_mask() {
        let layers = plan(
            "/w".as_ref(),
            &[],
            &[
                PathBuf::from("/h/.reef/registry/pdf"),
                PathBuf::from("/w/skills/mine"),
            ],
            &[PathBuf::from("/h/.reef")],
        );
        assert_eq!(
            order(&layers),
            vec![
                ("/w", Kind::Bind),
                ("/h/.reef", Kind::Mask),
                ("/w/.git", Kind::Pin),
                ("/w/reef.toml", Kind::ReadOnly),
                ("/w/.git/hooks", Kind::ReadOnly),
                ("/w/.git/config", Kind::ReadOnly),
                ("/h/.reef/registry/pdf", Kind::BindReadOnly),
            ],
            "a folder inside the workspace is visible already and is left out"
        );
    }
}
