//! git on a repository an agent wrote: the one place hanarang runs git. Everything in the
//! workdir, its `.git` included, is the agents', so no call executes anything the
//! repository names — hooks, fsmonitor, filter drivers, external diffs, textconv, a pager,
//! helpers — and each runs inside the fence a sister runs in, with none of hanarang's
//! environment, so that whatever might still run is no more than a sister.

pub mod approved;
pub mod branch;
pub mod facts;
pub mod patch;
mod readable;
pub mod remote;

use std::io::Read as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::fence::{Fence, Own, Plan, Tcp};
use crate::sister::launch::{Child, Io, Launch};

/// Every git call is bounded: a wedged repository must not hang the run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// What one call's answer may hold: more is cut (and said so), never read into memory.
pub(super) const ANSWER_CAP: usize = 64 * 1024 * 1024;

/// Settings that override whatever the repository's config says (the command line's
/// `-c` comes last), each switching off something git would otherwise execute or
/// something that would make git show other bytes than the committed ones.
const OVERRIDES: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "core.sshCommand=false",
    "core.askPass=false",
    "core.useReplaceRefs=false",
    "core.commitGraph=false",
    "credential.helper=",
    "log.showSignature=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=dirty",
    "status.submoduleSummary=false",
    "protocol.allow=never",
    "advice.graftFileDeprecated=false",
];

/// The variables of hanarang's environment git may see: where to find programs, the
/// person's own identity (their global config) and language. Nothing else — no token, no
/// database URL, no `GIT_*` of the person's shell.
const KEPT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "XDG_CONFIG_HOME",
    "LANG",
    "LC_ALL",
    "LC_MESSAGES",
    "TZ",
];

/// Why a git call gave no answer.
pub(super) enum GitError {
    /// git ran and said no: the last line of what it said.
    Failed(String),
    /// git could not be run at all.
    Unavailable(String),
}

/// A project's workdir as git is run on it, and what of hanarang's git may not reach.
#[derive(Debug, Clone, Default)]
pub struct Repo {
    workdir: PathBuf,
    own: Own,
}

impl Repo {
    pub fn new(workdir: &Path, own: &Own) -> Repo {
        Repo {
            workdir: workdir.to_path_buf(),
            own: own.clone(),
        }
    }

    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// hanarang's runs folder, where its own files beside a repository go.
    pub fn runs_dir(&self) -> Option<&Path> {
        self.own.runs.as_deref()
    }

    /// The workdir, when it holds a repository's `.git` (a file-system look, so a workdir
    /// that is no repository costs no process). Only the workdir itself: one above it (a
    /// home folder's dotfiles) is not the project's, and is not the agents' to write.
    fn top(&self) -> Option<&Path> {
        let dir = self.workdir.as_path();
        dir.join(".git").symlink_metadata().is_ok().then_some(dir)
    }

    /// Whether the workdir is inside a git repository.
    pub fn is_repository(&self) -> bool {
        self.top().is_some()
    }

    /// git's answer to `args`, as text (invalid UTF-8 replaced).
    pub(super) async fn git(&self, args: &[&str]) -> Result<String, GitError> {
        let (out, _) = self.git_bytes(args, None, ANSWER_CAP).await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// git's answer to `args` talking to a remote over HTTP(S): the only call that may
    /// reach the network. It runs in a git folder of hanarang's own over the repository's
    /// objects (`view`), so nothing of the agents' config can rewrite the URL, add a proxy
    /// or a helper, or see the token. `settings` are added after the overrides (a
    /// credential helper, the protocols allowed); `readable` are files of hanarang's it
    /// may read (the credential file). A helper is run through the shell, which this call
    /// alone may execute.
    pub(super) async fn git_remote(
        &self,
        view: &View,
        args: &[&str],
        settings: &[(&str, String)],
        readable: &[PathBuf],
    ) -> Result<String, GitError> {
        let network = Network { settings, readable };
        let command = self.command_with(&[], Some(view), Some(&network), args)?;
        let said =
            |e: std::io::Error| GitError::Unavailable(format!("git {}: {e}", args.join(" ")));
        let (out, _) = run(command, None, ANSWER_CAP, args)
            .await
            .map_err(|e| match e {
                RunError::Io(e) => said(e),
                RunError::Git(e) => e,
            })?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// git's answer to `args` with `input` on its stdin, up to `cap` bytes: the bytes,
    /// and whether there were more.
    pub(super) async fn git_bytes(
        &self,
        args: &[&str],
        input: Option<Vec<u8>>,
        cap: usize,
    ) -> Result<(Vec<u8>, bool), GitError> {
        let neutral = self.neutralized_drivers().await?;
        let command = self.command(&neutral, None, args)?;
        let said =
            |e: std::io::Error| GitError::Unavailable(format!("git {}: {e}", args.join(" ")));
        run(command, input, cap, args).await.map_err(|e| match e {
            RunError::Io(e) => said(e),
            RunError::Git(e) => e,
        })
    }

    /// A git folder of hanarang's own over the repository's objects, where git shows
    /// them as committed: none of the agent's config, hooks, attributes, refs, shallow
    /// file or replacements is there. Kept in the runs folder, out of the agents' reach.
    pub(super) async fn view(&self) -> Result<View, GitError> {
        let out = self
            .git(&[
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--show-object-format",
            ])
            .await?;
        let mut lines = out.lines();
        let (Some(common), Some(format)) = (lines.next(), lines.next()) else {
            return Err(GitError::Failed(format!("git rev-parse said {out:?}")));
        };
        if !format.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(GitError::Failed(format!("an object format of {format:?}")));
        }
        let objects = PathBuf::from(common).join("objects");
        let parent = self.own.runs.clone().unwrap_or_else(std::env::temp_dir);
        let unavailable = |e: std::io::Error| {
            GitError::Unavailable(format!(
                "cannot make a git folder in {}: {e}",
                parent.display()
            ))
        };
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = parent.join(format!(
            ".git-view-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&parent).map_err(unavailable)?;
        std::fs::create_dir(&dir).map_err(unavailable)?;
        let view = View {
            dir,
            objects,
            format: format.to_string(),
        };
        std::fs::create_dir(view.dir.join("refs")).map_err(unavailable)?;
        std::fs::write(view.dir.join("HEAD"), "ref: refs/heads/none\n").map_err(unavailable)?;
        std::fs::write(
            view.dir.join("config"),
            format!(
                "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = {format}\n"
            ),
        )
        .map_err(unavailable)?;
        Ok(view)
    }

    /// git's answer to `args` in `view`, up to `cap` bytes, and whether there were more.
    pub(super) async fn git_in(
        &self,
        view: &View,
        args: &[&str],
        cap: usize,
    ) -> Result<(Vec<u8>, bool), GitError> {
        let command = self.command(&[], Some(view), args)?;
        run(command, None, cap, args).await.map_err(|e| match e {
            RunError::Io(e) => GitError::Unavailable(format!("git {}: {e}", args.join(" "))),
            RunError::Git(e) => e,
        })
    }

    /// The blobs `ids` name, read as committed (no filter, no textconv, no replacement),
    /// each summed up as it streams by: nothing of a large blob is held in memory.
    pub(super) async fn blobs(&self, view: &View, ids: &[String]) -> Result<Vec<Blob>, GitError> {
        let objects = self.objects(view, ids).await?;
        objects
            .into_iter()
            .zip(ids)
            .map(|(o, id)| match o.kind.as_str() {
                "blob" => Ok(o.blob),
                other => Err(GitError::Failed(format!("{id} is not a blob (a {other})"))),
            })
            .collect()
    }

    /// The objects `ids` name, read as stored, each summed up as it streams by, with the
    /// id its bytes hash to: an object rewritten in place (same name, other bytes) shows.
    pub(super) async fn objects(
        &self,
        view: &View,
        ids: &[String],
    ) -> Result<Vec<Object>, GitError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut command = self.command(&[], Some(view), &["cat-file", "--batch"])?;
        command.stderr(Io::Null);
        let input = ids.iter().fold(String::new(), |mut s, id| {
            s.push_str(id);
            s.push('\n');
            s
        });
        let unavailable = |e: std::io::Error| GitError::Unavailable(format!("git cat-file: {e}"));
        let mut child = spawn(command).map_err(unavailable)?;
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let feed = async {
            if let Some(mut stdin) = stdin.take() {
                // A git that stopped reading has said why on stderr.
                let _ = stdin.write_all(input.as_bytes()).await;
            }
        };
        let read = async {
            let Some(stdout) = stdout else {
                return Err(GitError::Unavailable("git cat-file: no output".into()));
            };
            let mut reader = BufReader::new(stdout);
            let mut objects = Vec::with_capacity(ids.len());
            for id in ids {
                objects.push(read_object(&mut reader, id, &view.format).await?);
            }
            Ok(objects)
        };
        let work = async {
            let ((), objects) = tokio::join!(feed, read);
            let _ = child.wait().await;
            objects
        };
        tokio::time::timeout(GIT_TIMEOUT * 4, work)
            .await
            .map_err(|_| GitError::Unavailable("git cat-file timed out".into()))?
    }

    /// The filter drivers the repository's config (and every file it includes) defines:
    /// each is switched off, so a `filter=` attribute anywhere runs nothing.
    async fn neutralized_drivers(&self) -> Result<Vec<String>, GitError> {
        let command = self.command(&[], None, &["config", "--list", "--name-only", "-z"])?;
        // A config git cannot list is one whose drivers are unknown: nothing runs on it.
        let (names, _) = run(command, None, ANSWER_CAP, &["config", "--list"])
            .await
            .map_err(|e| match e {
                RunError::Io(e) => GitError::Unavailable(format!("git config --list: {e}")),
                RunError::Git(e) => e,
            })?;
        let mut drivers: Vec<String> = String::from_utf8_lossy(&names)
            .split('\0')
            .filter_map(|key| {
                let rest = key.strip_prefix("filter.")?;
                let (driver, _) = rest.rsplit_once('.')?;
                Some(driver.to_string())
            })
            .collect();
        drivers.sort();
        drivers.dedup();
        Ok(drivers)
    }

    /// `git <args>`, in the repository's top folder, with the overrides, the filter
    /// drivers switched off, a bare environment and the fence.
    fn command(
        &self,
        drivers: &[String],
        view: Option<&View>,
        args: &[&str],
    ) -> Result<Launch, GitError> {
        self.command_with(drivers, view, None, args)
    }

    /// `command`, for a call that talks to a remote when `network` is given.
    fn command_with(
        &self,
        drivers: &[String],
        view: Option<&View>,
        network: Option<&Network<'_>>,
        args: &[&str],
    ) -> Result<Launch, GitError> {
        let Some(top) = self.top() else {
            return Err(GitError::Failed(format!(
                "{} is not in a git repository",
                self.workdir.display()
            )));
        };
        // A view reads the repository's objects only (their alternates included).
        let walked = if view.is_some() { &[][..] } else { args };
        if let Some(file) = readable::blocking_file(top, walked) {
            return Err(GitError::Unavailable(format!(
                "{} is not a regular file (a FIFO, a device or a socket): git would wait on it",
                file.display()
            )));
        }
        let git = program().map_err(GitError::Unavailable)?;
        let mut command = Launch::new(&git.path);
        command.args(["--no-pager"]).args(args);
        command.env_clear();
        for name in KEPT_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        // Given as variables, not `-c`: a driver's name may hold a `=`, which `-c` would
        // read as the end of the key.
        let settings = OVERRIDES
            .iter()
            .filter_map(|s| s.split_once('='))
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .chain(drivers.iter().flat_map(|driver| {
                [
                    ("clean", ""),
                    ("smudge", ""),
                    ("process", ""),
                    ("required", "false"),
                ]
                .map(|(key, value)| (format!("filter.{driver}.{key}"), value.to_string()))
            }))
            .chain(
                network
                    .map(|n| n.settings)
                    .unwrap_or_default()
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.clone())),
            );
        let mut count = 0;
        for (i, (key, value)) in settings.enumerate() {
            command
                .env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
            count = i + 1;
        }
        command.env("GIT_CONFIG_COUNT", count.to_string());
        // The repository is where the workdir says, not where its config points
        // (`core.worktree`); replacement objects and grafts could show other bytes than
        // the committed ones; optional locks would have a read write the index.
        match view {
            Some(view) => command
                .env("GIT_DIR", &view.dir)
                .env("GIT_OBJECT_DIRECTORY", &view.objects)
                .current_dir(&view.dir),
            None => command
                .env("GIT_DIR", top.join(".git"))
                .env("GIT_WORK_TREE", top)
                .current_dir(top),
        };
        command
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_GRAFT_FILE", "/dev/null")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Io::Null)
            .stdout(Io::Piped)
            .stderr(Io::Piped);
        let fence = Fence {
            plan: Plan {
                protected: self.own.files.clone(),
                readable: Vec::new(),
                // git writes the index and refs of the repository in the workdir; nothing
                // it does reaches the network but a push to (or fetch from) the forge.
                writable: [self.workdir.clone(), PathBuf::from("/dev/null")]
                    .into_iter()
                    // A fetch writes FETCH_HEAD in hanarang's own folder.
                    .chain(network.and(view).map(|v| v.dir.clone()))
                    .collect(),
                tcp: match network {
                    Some(_) => self.own.db_port.map_or(Tcp::Open, Tcp::ClosedPort),
                    None => Tcp::Closed,
                },
                // git and its own helpers only: no shell (but to run a credential helper
                // of hanarang's own), no program of the workdir.
                exec: Some(match network {
                    Some(_) => git.exec.iter().cloned().chain(shell()).collect(),
                    None => git.exec.clone(),
                }),
            },
            required: self.own.required,
            hidden_env: Vec::new(),
        };
        let readable: Vec<PathBuf> = view
            .map(|v| v.dir.clone())
            .into_iter()
            .chain(network.map(|n| n.readable.to_vec()).unwrap_or_default())
            .collect();
        fence
            .apply(&mut command, &readable, "git")
            .map_err(GitError::Unavailable)?;
        Ok(command)
    }
}

/// What a call that talks to a remote adds: its settings, and the files of hanarang's it
/// may read.
struct Network<'a> {
    settings: &'a [(&'a str, String)],
    readable: &'a [PathBuf],
}

/// The git hanarang runs, found once: an absolute path (never a relative `PATH` entry,
/// which would find the workdir's own `git`), and what it may execute: itself, its own
/// helpers (`--exec-path`) and its ELF interpreter.
struct Program {
    path: PathBuf,
    exec: Vec<PathBuf>,
}

fn program() -> Result<&'static Program, String> {
    static PROGRAM: std::sync::OnceLock<Result<Program, String>> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(find_program)
        .as_ref()
        .map_err(Clone::clone)
}

fn find_program() -> Result<Program, String> {
    let path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .ok_or("git is not installed (no git on an absolute PATH entry)")?;
    let real = std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut exec = vec![real.clone()];
    let helpers = std::process::Command::new(&real)
        .arg("--exec-path")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    exec.extend(helpers.filter(|dir| dir.is_absolute()));
    exec.extend(elf_interpreter(&real).and_then(|i| std::fs::canonicalize(i).ok()));
    Ok(Program { path, exec })
}

/// The shell git runs a credential helper with, and its loader.
fn shell() -> Vec<PathBuf> {
    let Ok(sh) = std::fs::canonicalize("/bin/sh") else {
        return Vec::new();
    };
    let loader = elf_interpreter(&sh).and_then(|l| std::fs::canonicalize(l).ok());
    std::iter::once(sh).chain(loader).collect()
}

/// The program interpreter (`PT_INTERP`) a 64-bit little-endian ELF file names, when it
/// names one: the dynamic loader the kernel executes to start it.
pub(super) fn elf_interpreter(binary: &Path) -> Option<PathBuf> {
    let mut head = Vec::new();
    std::fs::File::open(binary)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    let bytes = |at: u64, n: usize| -> Option<&[u8]> {
        let at = usize::try_from(at).ok()?;
        head.get(at..at.checked_add(n)?)
    };
    let number = |at: u64, n: usize| -> Option<u64> {
        let mut value = [0u8; 8];
        value[..n].copy_from_slice(bytes(at, n)?);
        Some(u64::from_le_bytes(value))
    };
    // "\x7fELF", 64-bit, little-endian.
    if bytes(0, 6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (table, entry, entries) = (number(0x20, 8)?, number(0x36, 2)?, number(0x38, 2)?);
    (0..entries).find_map(|i| {
        let header = table.checked_add(i.checked_mul(entry)?)?;
        if number(header, 4)? != 3 {
            return None;
        }
        let (offset, size) = (number(header + 8, 8)?, number(header + 32, 8)?);
        let name = bytes(offset, usize::try_from(size).ok()?)?;
        let name = name.split(|b| *b == 0).next()?;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(name)))
    })
}

/// hanarang's own git folder over a repository's objects (`Repo::view`), removed with it.
pub(super) struct View {
    dir: PathBuf,
    objects: PathBuf,
    /// The repository's object format: `sha1` or `sha256`.
    format: String,
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A blob as committed: its size, its SHA-256, and whether git would call it binary (a
/// NUL byte in its first 8000 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Blob {
    pub size: u64,
    pub sha256: String,
    pub binary: bool,
}

/// One object as `cat-file --batch` gives it: its type, what it holds as a blob would be
/// shown, and the id its bytes hash to.
pub(super) struct Object {
    pub kind: String,
    pub blob: Blob,
    /// The object's id computed from its bytes (`<type> <size>\0<bytes>`, in the
    /// repository's object format).
    pub hashed_id: String,
}

/// The hash a git object id is, in `format`.
enum IdHasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl IdHasher {
    fn new(format: &str) -> IdHasher {
        use sha2::Digest as _;
        match format {
            "sha256" => IdHasher::Sha256(sha2::Sha256::new()),
            _ => IdHasher::Sha1(sha1::Digest::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            IdHasher::Sha1(h) => sha1::Digest::update(h, bytes),
            IdHasher::Sha256(h) => sha2::Digest::update(h, bytes),
        }
    }

    fn hex(self) -> String {
        match self {
            IdHasher::Sha1(h) => hex(&sha1::Digest::finalize(h)),
            IdHasher::Sha256(h) => hex(&sha2::Digest::finalize(h)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            s.push_str(&format!("{b:02x}"));
            s
        })
}

/// One object of `cat-file --batch`'s answer: `<id> <type> <size>\n<bytes>\n`.
async fn read_object<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    id: &str,
    format: &str,
) -> Result<Object, GitError> {
    use sha2::Digest;
    let mut header = String::new();
    reader
        .read_line(&mut header)
        .await
        .map_err(|e| GitError::Unavailable(format!("git cat-file: {e}")))?;
    let (kind, size) = match header.split_whitespace().collect::<Vec<_>>()[..] {
        [_, kind, size] => (kind.to_string(), size.parse::<u64>().ok()),
        _ => (String::new(), None),
    };
    let size =
        size.ok_or_else(|| GitError::Failed(format!("{id} cannot be read ({})", header.trim())))?;
    let mut hasher = sha2::Sha256::new();
    let mut id_hasher = IdHasher::new(format);
    id_hasher.update(format!("{kind} {size}\0").as_bytes());
    let mut binary = false;
    let mut seen = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut body = reader.take(size);
    loop {
        let n = body
            .read(&mut chunk)
            .await
            .map_err(|e| GitError::Unavailable(format!("git cat-file: {e}")))?;
        if n == 0 {
            break;
        }
        let bytes = &chunk[..n];
        if seen < 8000 {
            let look = usize::try_from(8000 - seen).unwrap_or(n).min(n);
            binary |= bytes[..look].contains(&0);
        }
        seen += n as u64;
        hasher.update(bytes);
        id_hasher.update(bytes);
    }
    if seen != size {
        return Err(GitError::Unavailable(format!(
            "git cat-file: {id} ended after {seen} of {size} bytes"
        )));
    }
    let mut newline = [0u8; 1];
    let _ = reader.read_exact(&mut newline).await;
    Ok(Object {
        kind,
        blob: Blob {
            size,
            sha256: hex(&hasher.finalize()),
            binary,
        },
        hashed_id: id_hasher.hex(),
    })
}

enum RunError {
    Io(std::io::Error),
    Git(GitError),
}

fn spawn(mut command: Launch) -> std::io::Result<Child> {
    command.stdin(Io::Piped);
    command.spawn(None)
}

/// Runs `command` to its end within the time limit, its answer read up to `cap`, the rest
/// drained; the group is killed when the time is up.
async fn run(
    mut command: Launch,
    input: Option<Vec<u8>>,
    cap: usize,
    args: &[&str],
) -> Result<(Vec<u8>, bool), RunError> {
    if input.is_some() {
        command.stdin(Io::Piped);
    }
    let mut child = command.spawn(None).map_err(RunError::Io)?;
    let pid = child.id();
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let feed = async move {
        if let (Some(mut stdin), Some(input)) = (stdin, input) {
            let _ = stdin.write_all(&input).await;
        }
    };
    let work = async {
        let (_, out, err, status) = tokio::join!(
            feed,
            read_capped(stdout, cap),
            read_capped(stderr, 64 * 1024),
            child.wait()
        );
        (out, err, status)
    };
    let Ok((out, err, status)) = tokio::time::timeout(GIT_TIMEOUT, work).await else {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        return Err(RunError::Git(GitError::Unavailable(format!(
            "git {} timed out",
            args.join(" ")
        ))));
    };
    let status = status.map_err(RunError::Io)?;
    if status.success() {
        Ok(out)
    } else {
        let said = String::from_utf8_lossy(&err.0);
        let last = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        Err(RunError::Git(GitError::Failed(last.trim().to_string())))
    }
}

/// Up to `cap` bytes of `pipe`, and whether it held more (read to its end all the same,
/// so git never blocks on a full pipe).
async fn read_capped<R: AsyncRead + Unpin>(pipe: Option<R>, cap: usize) -> (Vec<u8>, bool) {
    let Some(pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut head = pipe.take(u64::try_from(cap).unwrap_or(u64::MAX));
    let _ = head.read_to_end(&mut kept).await;
    let mut rest = head.into_inner();
    let more = tokio::io::copy(&mut rest, &mut tokio::io::sink())
        .await
        .is_ok_and(|n| n > 0);
    (kept, more)
}

/// The paths `git status` reports: changed, staged, deleted or untracked (ignored files
/// are not changes).
pub async fn dirty_paths(repo: &Repo) -> Result<Vec<String>, String> {
    let out = repo
        .git(&[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=dirty",
            "--no-renames",
        ])
        .await
        .map_err(|e| {
            failed(
                &format!("cannot read the state of {}", repo.workdir.display()),
                e,
            )
        })?;
    let mut paths = Vec::new();
    let mut entries = out.split('\0').filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        let (status, path) = entry.split_at(entry.len().min(3));
        paths.push(path.to_string());
        // A rename or copy is followed by the path it came from.
        if status.starts_with('R') || status.starts_with('C') {
            entries.next();
        }
    }
    Ok(paths)
}

/// Up to ten names, then how many more.
pub fn some_names(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut names = paths
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        names.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    names
}

/// `what` failed, with what git said.
pub(super) fn failed(what: &str, e: GitError) -> String {
    match e {
        GitError::Failed(said) if !said.is_empty() => format!("{what}: git says {said:?}"),
        GitError::Failed(_) => what.to_string(),
        GitError::Unavailable(why) => format!("{what}: {why}"),
    }
}

/// Whether `name` may name a branch (and is no option in disguise).
pub(super) async fn is_branch_name(repo: &Repo, name: &str) -> bool {
    !name.starts_with('-')
        && repo
            .git(&["check-ref-format", "--branch", name])
            .await
            .is_ok()
}

/// The commit `rev` names, when it names one.
pub(super) async fn commit_of(repo: &Repo, rev: &str) -> Option<String> {
    repo.git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ])
    .await
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_of_a_dynamic_program_is_found() {
        let this = std::env::current_exe().unwrap();
        let loader = elf_interpreter(&this).expect("a dynamically linked test binary");
        assert!(loader.is_absolute() && loader.exists(), "{loader:?}");
        assert_eq!(elf_interpreter(Path::new("/etc/hostname")), None);
    }
}
