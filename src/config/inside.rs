//! Reading a file of a project's workdir as a sister could open it: the workdir and all in
//! it are the agents', so a file hanarang reads there (the `instructions`, a prompt, the
//! plan) must not lead it out: a link to the config, `/proc/self/environ` or a device, a
//! FIFO, or a hard link to one of hanarang's own files is refused, naming the key.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{Mode, SFlag};

/// Why a file of the workdir was not read: the key it was read for, and the reason (the
/// target's path at most, never its bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct Refused {
    pub key: String,
    pub reason: String,
}

impl Refused {
    pub fn new(key: &str, reason: String) -> Refused {
        Refused {
            key: key.to_string(),
            reason,
        }
    }
}

/// The most of a recipe's text (the instructions, a prompt) hanarang reads.
pub const MAX_RECIPE_BYTES: u64 = 1024 * 1024;

/// The text of `path` (absolute, or relative to `workdir`), opened so that nothing on the
/// way leads out of the workdir, even when a sister swaps a link in as it is opened: it
/// must be a regular file, none of `own` (hanarang's files, compared as device and inode,
/// so a hard link counts), at most `cap` bytes of UTF-8. The workdir itself may be a link
/// (the operator's choice): it is resolved as usual.
pub fn read_inside(
    workdir: &Path,
    path: &Path,
    key: &str,
    own: &[PathBuf],
    cap: u64,
) -> Result<String, Refused> {
    read_beneath(workdir, path, key, own, cap, open_beneath)
}

/// How a path below the workdir's canonical root is opened.
type Opener = fn(&Path, &Path) -> Result<OwnedFd, Opened>;

/// `read_inside` with the way of opening given, so a test can take the one without
/// `openat2` on a kernel that has it.
fn read_beneath(
    workdir: &Path,
    path: &Path,
    key: &str,
    own: &[PathBuf],
    cap: u64,
    open: Opener,
) -> Result<String, Refused> {
    let refused = |reason: String| Refused::new(key, reason);
    let root = std::fs::canonicalize(workdir).map_err(|e| {
        refused(format!(
            "the workdir {} cannot be opened: {e}",
            workdir.display()
        ))
    })?;
    let relative = relative_to(workdir, &root, path).ok_or_else(|| {
        refused(format!(
            "{} is outside the workdir {}; hanarang reads files inside it only",
            path.display(),
            workdir.display()
        ))
    })?;
    let shown = relative.display();
    let file = match open(&root, &relative) {
        Ok(fd) => std::fs::File::from(fd),
        Err(Opened::Leaves) => {
            return Err(refused(format!(
                "{shown} links out of the workdir (to {}); hanarang reads files inside it only",
                target(&root, &relative)
            )));
        }
        Err(Opened::Link(link)) => {
            let which = if link == relative {
                format!("{shown} is a link")
            } else {
                format!("{shown} goes through a link ({})", link.display())
            };
            return Err(refused(format!(
                "{which}, and this kernel cannot open files beneath a folder (no openat2: \
                 Linux before 5.6, or a seccomp filter), so hanarang follows no link in the \
                 workdir; put the file itself there"
            )));
        }
        Err(Opened::Failed(e)) => {
            return Err(refused(format!(
                "cannot read {}: {e}",
                workdir.join(&relative).display()
            )));
        }
    };
    read_opened(
        file,
        &shown.to_string(),
        "inside the workdir",
        key,
        own,
        cap,
    )
}

/// The text of an opened file, `shown` as its name, read only if it is a regular file
/// (`whose` saying which hanarang reads), none of `own`, at most `cap` bytes of UTF-8.
pub(super) fn read_opened(
    file: std::fs::File,
    shown: &str,
    whose: &str,
    key: &str,
    own: &[PathBuf],
    cap: u64,
) -> Result<String, Refused> {
    let refused = |reason: String| Refused::new(key, reason);
    let meta = file
        .metadata()
        .map_err(|e| refused(format!("cannot read {shown}: {e}")))?;
    let kind = meta.file_type();
    let not_a_file = if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else {
        None
    };
    if let Some(kind) = not_a_file {
        return Err(refused(format!(
            "{shown} is {kind}, not a file; hanarang reads only regular files {whose}"
        )));
    }
    if let Some(mine) = own.iter().find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    }) {
        return Err(refused(format!(
            "{shown} is one of hanarang's own files ({}); hanarang reads only the project's",
            mine.display()
        )));
    }
    let too_large = |bytes: u64| {
        refused(format!(
            "{shown} is {bytes} bytes, more than the {cap} hanarang reads"
        ))
    };
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(format!("cannot read {shown}: {e}")))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| refused(format!("{shown} is not UTF-8 text")))
}

/// The text of the operator's file `path` (a prompt in a folder of no workdir; `path`
/// canonical but for its last name), not a sister's: its last name, when a link, is
/// followed only to a file that lies in none of `workdirs` (canonical), where a sister
/// could put a link or a hard link to what it must not see; then as `read_opened`.
pub(super) fn read_operators(
    path: &Path,
    workdirs: &[PathBuf],
    key: &str,
    own: &[PathBuf],
    cap: u64,
) -> Result<String, Refused> {
    let refused = |reason: String| Refused::new(key, reason);
    let cannot = |e: std::io::Error| refused(format!("cannot read {}: {e}", path.display()));
    let open = |path: &Path| nix::fcntl::open(path, flags() | OFlag::O_NOFOLLOW, Mode::empty());
    let fd = match open(path) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => {
            let resolved = std::fs::canonicalize(path).map_err(cannot)?;
            if let Some(workdir) = workdirs.iter().find(|w| resolved.starts_with(w)) {
                return Err(refused(format!(
                    "{} links into the workdir {} (to {}), whose files are the agents' to \
                     change; put the file itself there, or the prompts folder in the workdir",
                    path.display(),
                    workdir.display(),
                    resolved.display()
                )));
            }
            // Canonical: no link left on its way.
            open(&resolved).map_err(|e| cannot(e.into()))?
        }
        Err(e) => return Err(cannot(e.into())),
    };
    read_opened(
        std::fs::File::from(fd),
        &path.display().to_string(),
        "as prompts",
        key,
        own,
        cap,
    )
}

/// `path` as a path below the workdir, or `None` when it is not written below it (as
/// configured, or resolved).
fn relative_to(workdir: &Path, root: &Path, path: &Path) -> Option<PathBuf> {
    if path.is_relative() {
        return Some(path.to_path_buf());
    }
    let below = path
        .strip_prefix(workdir)
        .or_else(|_| path.strip_prefix(root))
        .ok()?;
    Some(below.to_path_buf())
}

#[derive(Debug)]
enum Opened {
    /// Something on the way leads out of the workdir.
    Leaves,
    /// Without `openat2`, this link on the way (a path below the workdir) was not followed.
    Link(PathBuf),
    Failed(std::io::Error),
}

/// How a file is opened for reading: a FIFO opens at once (and is refused after), a
/// terminal does not become hanarang's.
fn flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC
}

/// `relative` opened below `root`: by the kernel's own walk (`openat2`, links resolved
/// but never above `root`, none of `/proc`'s magic links), so no link swapped in meanwhile
/// leads elsewhere; where the kernel lacks it (before Linux 5.6) or a seccomp filter
/// denies it, `open_walked`.
fn open_beneath(root: &Path, relative: &Path) -> Result<OwnedFd, Opened> {
    let failed = |e: Errno| Opened::Failed(std::io::Error::from(e));
    let dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(failed)?;
    let how = OpenHow::new()
        .flags(flags())
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match nix::fcntl::openat2(&dir, relative, how) {
        Ok(fd) => Ok(fd),
        // An absolute link is refused even when it points inside: its target, resolved,
        // is opened the same way.
        Err(Errno::EXDEV) => match std::fs::canonicalize(root.join(relative)) {
            Ok(resolved) if resolved.starts_with(root) => {
                let below = resolved.strip_prefix(root).unwrap_or(&resolved);
                nix::fcntl::openat2(&dir, below, how).map_err(|e| match e {
                    Errno::EXDEV | Errno::ELOOP => Opened::Leaves,
                    e => failed(e),
                })
            }
            _ => Err(Opened::Leaves),
        },
        Err(Errno::ELOOP) if leads_out(root, relative) => Err(Opened::Leaves),
        // Older container seccomp profiles deny system calls they do not know with EPERM.
        Err(Errno::ENOSYS | Errno::EPERM) => open_walked(root, relative),
        Err(e) => Err(failed(e)),
    }
}

/// Without `openat2`: the path walked one name at a time, each opened below the folder
/// before it and none followed if it is a link, so what is opened is what was checked, and
/// nothing (a link swapped in meanwhile, a `/proc` that cannot be read) can make it
/// otherwise. The price: a link inside the workdir is refused too (`Opened::Link`).
fn open_walked(root: &Path, relative: &Path) -> Result<OwnedFd, Opened> {
    let failed = |e: Errno| Opened::Failed(std::io::Error::from(e));
    let mut dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(failed)?;
    let names: Vec<&std::ffi::OsStr> = relative
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(Some(name)),
            Component::CurDir => Ok(None),
            // `..` (or a root) is a way out: never walked.
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => Err(Opened::Leaves),
        })
        .filter_map(Result::transpose)
        .collect::<Result<_, _>>()?;
    let Some((last, folders)) = names.split_last() else {
        return Err(failed(Errno::EISDIR));
    };
    let mut walked = PathBuf::new();
    for name in folders {
        walked.push(name);
        // O_PATH with O_NOFOLLOW opens a link itself, which its type then shows.
        let next = nix::fcntl::openat(
            &dir,
            *name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(failed)?;
        let kind = SFlag::from_bits_truncate(nix::sys::stat::fstat(&next).map_err(failed)?.st_mode)
            & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK {
            return Err(Opened::Link(walked));
        }
        if kind != SFlag::S_IFDIR {
            return Err(failed(Errno::ENOTDIR));
        }
        dir = next;
    }
    match nix::fcntl::openat(&dir, *last, flags() | OFlag::O_NOFOLLOW, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::ELOOP) => Err(Opened::Link(walked.join(last))),
        Err(e) => Err(failed(e)),
    }
}

/// Whether `relative` goes up out of the workdir, or through a link that leads out.
fn leads_out(root: &Path, relative: &Path) -> bool {
    relative.components().any(|c| c == Component::ParentDir)
        || std::fs::canonicalize(root.join(relative)).is_ok_and(|p| !p.starts_with(root))
}

/// Where `relative` leads, for a message only: resolved, else the link's own text.
fn target(root: &Path, relative: &Path) -> String {
    let path = root.join(relative);
    match std::fs::canonicalize(&path) {
        Ok(resolved) => resolved.display().to_string(),
        Err(_) => std::fs::read_link(&path)
            .map_or_else(|_| "outside".to_string(), |t| t.display().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workdir with its project's files, and a folder beside it (hanarang's, say).
    struct Dirs {
        base: PathBuf,
        work: PathBuf,
        outside: PathBuf,
    }

    impl Dirs {
        fn new(label: &str) -> Dirs {
            let base = std::env::temp_dir()
                .join(format!("hanarang-inside-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            let (work, outside) = (base.join("work"), base.join("hanarang"));
            std::fs::create_dir_all(work.join("docs")).unwrap();
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(work.join("docs/AGENTS.md"), "be kind").unwrap();
            std::fs::write(outside.join("config.toml"), "api_key = \"sk-secret\"").unwrap();
            Dirs {
                base,
                work,
                outside,
            }
        }

        fn read(&self, path: &str) -> Result<String, Refused> {
            read_inside(
                &self.work,
                Path::new(path),
                "projects.app.instructions",
                &[],
                64,
            )
        }

        fn link(&self, name: &str, to: impl AsRef<Path>) {
            std::os::unix::fs::symlink(to, self.work.join(name)).unwrap();
        }
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    #[test]
    fn a_file_or_a_link_inside_the_workdir_is_read() {
        let d = Dirs::new("in");
        assert_eq!(d.read("docs/AGENTS.md").unwrap(), "be kind");
        d.link("AGENTS.md", "docs/AGENTS.md");
        assert_eq!(d.read("AGENTS.md").unwrap(), "be kind");
        d.link("ABSOLUTE.md", d.work.join("docs/AGENTS.md"));
        assert_eq!(d.read("ABSOLUTE.md").unwrap(), "be kind");
        let absolute = d.work.join("AGENTS.md");
        assert_eq!(d.read(absolute.to_str().unwrap()).unwrap(), "be kind");
        // The workdir itself may be reached through a link.
        std::os::unix::fs::symlink(&d.work, d.base.join("via")).unwrap();
        let via = read_inside(&d.base.join("via"), Path::new("AGENTS.md"), "k", &[], 64);
        assert_eq!(via.unwrap(), "be kind");
    }

    #[test]
    fn a_link_out_of_the_workdir_is_refused_naming_the_key_and_its_target() {
        let d = Dirs::new("out");
        d.link("AGENTS.md", d.outside.join("config.toml"));
        let e = d.read("AGENTS.md").unwrap_err();
        let config = std::fs::canonicalize(d.outside.join("config.toml")).unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "projects.app.instructions: AGENTS.md links out of the workdir (to {}); hanarang reads files inside it only",
                config.display()
            )
        );
        d.link("UP.md", "../hanarang/config.toml");
        assert!(d.read("UP.md").unwrap_err().reason.contains("links out"));
        assert!(
            d.read("../hanarang/config.toml")
                .unwrap_err()
                .reason
                .contains("links out")
        );
        let e = d.read(d.outside.join("config.toml").to_str().unwrap());
        assert!(e.unwrap_err().reason.contains("is outside the workdir"));
        d.link("docs/up", "../..");
        assert!(
            d.read("docs/up/hanarang/config.toml")
                .unwrap_err()
                .reason
                .contains("links out")
        );
    }

    #[test]
    fn proc_devices_fifos_and_folders_are_refused_without_waiting() {
        let d = Dirs::new("special");
        d.link("ENVIRON.md", "/proc/self/environ");
        assert!(
            d.read("ENVIRON.md")
                .unwrap_err()
                .reason
                .contains("links out")
        );
        d.link("ZERO.md", "/dev/zero");
        assert!(d.read("ZERO.md").unwrap_err().reason.contains("links out"));
        nix::unistd::mkfifo(&d.work.join("FIFO.md"), Mode::S_IRWXU).unwrap();
        assert_eq!(
            d.read("FIFO.md").unwrap_err().reason,
            "FIFO.md is a FIFO, not a file; hanarang reads only regular files inside the workdir"
        );
        assert!(d.read("docs").unwrap_err().reason.contains("is a folder"));
        assert!(
            d.read("missing.md")
                .unwrap_err()
                .reason
                .starts_with("cannot read ")
        );
    }

    #[test]
    fn a_hard_link_to_hanarangs_own_file_is_refused() {
        let d = Dirs::new("hard");
        let config = d.outside.join("config.toml");
        std::fs::hard_link(&config, d.work.join("AGENTS.md")).unwrap();
        let own = [config.clone()];
        let e = read_inside(&d.work, Path::new("AGENTS.md"), "k", &own, 64).unwrap_err();
        assert!(e.reason.contains("is one of hanarang's own files"), "{e}");
        // Without it in `own`, the same bytes are the project's file.
        assert!(read_inside(&d.work, Path::new("AGENTS.md"), "k", &[], 64).is_ok());
    }

    #[test]
    fn too_long_or_not_text_is_refused() {
        let d = Dirs::new("size");
        std::fs::write(d.work.join("long.md"), "x".repeat(65)).unwrap();
        assert_eq!(
            d.read("long.md").unwrap_err().reason,
            "long.md is 65 bytes, more than the 64 hanarang reads"
        );
        std::fs::write(d.work.join("bin.md"), [0xff, 0xfe]).unwrap();
        assert_eq!(
            d.read("bin.md").unwrap_err().reason,
            "bin.md is not UTF-8 text"
        );
    }

    #[test]
    fn without_openat2_no_link_is_followed_and_no_way_up_walked() {
        let d = Dirs::new("fallback");
        let root = std::fs::canonicalize(&d.work).unwrap();
        let walk = |path: &str| open_walked(&root, Path::new(path));
        let content = |fd: OwnedFd| std::io::read_to_string(std::fs::File::from(fd)).unwrap();
        assert_eq!(content(walk("docs/AGENTS.md").unwrap()), "be kind");
        assert_eq!(content(walk("./docs/./AGENTS.md").unwrap()), "be kind");
        d.link("AGENTS.md", d.outside.join("config.toml"));
        assert!(matches!(walk("AGENTS.md"), Err(Opened::Link(l)) if l == Path::new("AGENTS.md")));
        // A link that stays inside is refused as well: nothing is resolved, so nothing
        // swapped in between a check and the open can lead elsewhere.
        d.link("INSIDE.md", "docs/AGENTS.md");
        assert!(matches!(walk("INSIDE.md"), Err(Opened::Link(_))));
        d.link("docs/up", "../..");
        assert!(matches!(
            walk("docs/up/hanarang/config.toml"),
            Err(Opened::Link(l)) if l == Path::new("docs/up")
        ));
        assert!(matches!(
            walk("../hanarang/config.toml"),
            Err(Opened::Leaves)
        ));
        assert!(matches!(
            walk("docs/../../hanarang/config.toml"),
            Err(Opened::Leaves)
        ));
        // A FIFO opens at once (and read_inside refuses it after).
        nix::unistd::mkfifo(&d.work.join("FIFO.md"), Mode::S_IRWXU).unwrap();
        assert!(walk("FIFO.md").is_ok());
        assert!(matches!(walk("docs/AGENTS.md/x"), Err(Opened::Failed(_))));
        assert!(matches!(walk("missing/x"), Err(Opened::Failed(_))));
    }

    #[test]
    fn without_openat2_read_inside_names_the_link_it_did_not_follow() {
        let d = Dirs::new("fallback-read");
        let read = |path: &str| {
            read_beneath(
                &d.work,
                Path::new(path),
                "projects.app.instructions",
                &[],
                64,
                open_walked,
            )
        };
        assert_eq!(read("docs/AGENTS.md").unwrap(), "be kind");
        d.link("AGENTS.md", d.outside.join("config.toml"));
        assert_eq!(
            read("AGENTS.md").unwrap_err().to_string(),
            "projects.app.instructions: AGENTS.md is a link, and this kernel cannot open files \
             beneath a folder (no openat2: Linux before 5.6, or a seccomp filter), so hanarang \
             follows no link in the workdir; put the file itself there"
        );
        d.link("docs/up", "../..");
        assert!(
            read("docs/up/hanarang/config.toml")
                .unwrap_err()
                .reason
                .starts_with("docs/up/hanarang/config.toml goes through a link (docs/up), ")
        );
        assert!(
            read("../hanarang/config.toml")
                .unwrap_err()
                .reason
                .contains("links out")
        );
        nix::unistd::mkfifo(&d.work.join("FIFO.md"), Mode::S_IRWXU).unwrap();
        assert!(read("FIFO.md").unwrap_err().reason.contains("is a FIFO"));
    }
}
