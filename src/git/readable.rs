//! The files git opens of a repository before it answers, checked first: a FIFO (or a
//! device, a socket) an agent put at one would hold git until its timeout — attempt after
//! attempt — so the call fails at once, naming the file.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Files of the git folder git reads (a link followed, as git follows it).
const GIT_FOLDER: &[&str] = &[
    "HEAD",
    "config",
    "commondir",
    "index",
    "packed-refs",
    "shallow",
    "info/exclude",
    "info/attributes",
    "info/sparse-checkout",
    "info/grafts",
    "objects/info/alternates",
    "objects/info/http-alternates",
];

/// Names in the work tree whose files git reads as it walks it (a link is not followed:
/// git opens these without following one).
const IN_TREE: &[&str] = &[".gitignore", ".gitattributes", ".gitmodules"];

/// The subcommands that walk the work tree, reading `IN_TREE` files on the way.
const READS_THE_TREE: &[&str] = &["status", "checkout", "reset", "diff", "add", "stash"];

/// A walk of the tree looks at this many entries at most: past them (a vendored tree of
/// a hundred thousand files) git's own timeout still bounds the call.
const WALK_CAP: usize = 50_000;

/// The first file `git <args>` in `top` would open that is no regular file, when any.
pub(super) fn blocking_file(top: &Path, args: &[&str]) -> Option<PathBuf> {
    let git = top.join(".git");
    if let Some(found) = not_a_file(&git, GIT_FOLDER) {
        return Some(found);
    }
    if args.first().is_some_and(|a| READS_THE_TREE.contains(a)) {
        let mut budget = WALK_CAP;
        return in_tree(top, &mut budget);
    }
    None
}

/// The first of `names` in the git folder that would block an open.
fn not_a_file(git: &Path, names: &[&str]) -> Option<PathBuf> {
    let meta = git.symlink_metadata().ok()?;
    if !meta.is_dir() {
        return blocks(meta.file_type()).then(|| git.to_path_buf());
    }
    names
        .iter()
        .map(|n| git.join(n))
        .find(|path| std::fs::metadata(path).is_ok_and(|m| blocks(m.file_type())))
}

/// Whether opening a file of this kind to read it may wait for someone else (a FIFO's
/// writer, a device, a socket).
fn blocks(kind: std::fs::FileType) -> bool {
    kind.is_fifo() || kind.is_char_device() || kind.is_block_device() || kind.is_socket()
}

/// The first `IN_TREE` file under `dir` that would block an open, the git folder skipped.
fn in_tree(dir: &Path, budget: &mut usize) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut folders = Vec::new();
    for entry in entries.flatten() {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        if kind.is_dir() {
            if name != ".git" {
                folders.push(entry.path());
            }
        } else if blocks(kind) && IN_TREE.iter().any(|n| name == std::ffi::OsStr::new(n)) {
            return Some(entry.path());
        }
    }
    folders.iter().find_map(|f| in_tree(f, budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hanarang-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn a_fifo_where_git_reads_is_named_and_a_regular_file_is_not() {
        let top = &folder("readable-fifo");
        std::fs::create_dir_all(top.join(".git/info")).unwrap();
        std::fs::create_dir_all(top.join("src/deep")).unwrap();
        std::fs::write(top.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(top.join(".gitignore"), "target/\n").unwrap();
        assert_eq!(blocking_file(top, &["status"]), None);

        fifo(&top.join("src/deep/.gitignore"));
        assert_eq!(
            blocking_file(top, &["status"]),
            Some(top.join("src/deep/.gitignore"))
        );
        assert_eq!(
            blocking_file(top, &["rev-parse", "HEAD"]),
            None,
            "a call that does not walk the tree does not read it"
        );

        fifo(&top.join(".git/info/exclude"));
        assert_eq!(
            blocking_file(top, &["rev-parse", "HEAD"]),
            Some(top.join(".git/info/exclude"))
        );
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn a_link_in_the_git_folder_is_followed_to_what_it_names() {
        let top = &folder("readable-link");
        std::fs::create_dir_all(top.join(".git/objects/info")).unwrap();
        fifo(&top.join("elsewhere"));
        std::os::unix::fs::symlink(
            top.join("elsewhere"),
            top.join(".git/objects/info/alternates"),
        )
        .unwrap();
        assert_eq!(
            blocking_file(top, &["log"]),
            Some(top.join(".git/objects/info/alternates"))
        );
        std::fs::remove_dir_all(top).unwrap();
    }
}
