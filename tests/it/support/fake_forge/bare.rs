//! The forge's repository: one bare repository on disk, changed only with git's own
//! plumbing, as a forge changes it. Its branches, commits made on someone else's behalf,
//! and the three ways a pull request is merged (a merge commit, a squash commit, the head's
//! commits replayed on the base), each written with `merge-tree --write-tree` and
//! `commit-tree` and moved with a compare-and-swap `update-ref`.
//!
//! Left out: merge commits inside a rebased range are dropped (as `git rebase` drops them),
//! not recreated; signed commits; hooks.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a pull request is merged, whatever the forge calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A merge commit whose parents are the base and the head.
    Merge,
    /// One new commit on the base with the head's changes.
    Squash,
    /// The head's commits replayed one by one on the base, always as new commits
    /// (GitHub's "rebase and merge").
    Rebase,
    /// As `Rebase`, but the base is only moved forward when the head already contains it
    /// (Forgejo's "rebase": its commits keep their ids).
    RebaseOrFastForward,
    /// The base moved to the head, refused unless the head contains the base.
    FastForwardOnly,
}

/// Why a merge was not made.
#[derive(Debug, PartialEq, Eq)]
pub enum MergeError {
    /// The two sides change the same lines.
    Conflict,
    /// A fast-forward-only merge of a head that does not contain the base.
    NotFastForward,
    /// The base moved while the merge was being written.
    BaseMoved,
    /// git itself failed.
    Git(String),
}

/// Who a commit is by and when, for the ones the forge writes.
pub struct Signature<'a> {
    pub name: &'a str,
    pub email: &'a str,
}

pub struct Bare {
    path: PathBuf,
    /// A `$HOME` with nothing in it, so that no one's git configuration reaches the forge.
    home: PathBuf,
}

impl Bare {
    /// A new bare repository at `root/owner/repo.git` whose HEAD is `main`; with `seed`,
    /// `main` is the seed's checked-out commit.
    pub fn create(root: &Path, owner: &str, repo: &str, seed: Option<&Path>) -> Bare {
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("the forge's empty home");
        let path = root.join("repos").join(owner).join(format!("{repo}.git"));
        std::fs::create_dir_all(&path).expect("the forge's repository folder");
        let bare = Bare { path, home };
        bare.run(
            &["init", "--quiet", "--bare", "--initial-branch=main"],
            &[],
            None,
        )
        .expect("git init --bare");
        bare.run(&["config", "http.receivepack", "true"], &[], None)
            .expect("allow pushes over HTTP");
        if let Some(seed) = seed {
            let target = bare.path.display().to_string();
            let out = bare
                .isolated()
                .current_dir(seed)
                .args(["push", "--quiet", &target, "HEAD:refs/heads/main"])
                .output()
                .expect("git push runs");
            assert!(
                out.status.success(),
                "seeding the forge from {}: {}",
                seed.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        bare
    }

    /// The folder `git http-backend` serves (`GIT_PROJECT_ROOT`).
    pub fn project_root(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Every branch and the commit it points at.
    pub fn branches(&self) -> BTreeMap<String, String> {
        let out = self
            .run(
                &[
                    "for-each-ref",
                    "--format=%(refname:short) %(objectname)",
                    "refs/heads",
                ],
                &[],
                None,
            )
            .unwrap_or_default();
        out.lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(name, sha)| (name.to_string(), sha.to_string()))
            .collect()
    }

    /// Whether `sha` names a commit in the repository.
    pub fn has_commit(&self, sha: &str) -> bool {
        self.run(&["cat-file", "-e", &format!("{sha}^{{commit}}")], &[], None)
            .is_ok()
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        self.run(
            &["merge-base", "--is-ancestor", ancestor, descendant],
            &[],
            None,
        )
        .is_ok()
    }

    /// A commit on `branch` (a root commit when it does not exist yet) that writes `files`
    /// (path, content) over its tree; the branch is moved to it. Returns (old, new).
    pub fn commit_files(
        &self,
        branch: &str,
        files: &[(&str, &str)],
        author: &Signature<'_>,
        message: &str,
    ) -> Result<(Option<String>, String), String> {
        let parent = self.branches().get(branch).cloned();
        let index = self.path.join(format!("fake-index-{}", std::process::id()));
        let index_env = [("GIT_INDEX_FILE", index.to_str().unwrap_or_default())];
        let _ = std::fs::remove_file(&index);
        match &parent {
            Some(parent) => self.run(&["read-tree", parent], &index_env, None)?,
            None => self.run(&["read-tree", "--empty"], &index_env, None)?,
        };
        for (file, content) in files {
            let blob = self.run(
                &["hash-object", "-w", "--stdin"],
                &[],
                Some(content.as_bytes()),
            )?;
            let entry = format!("100644,{blob},{file}");
            self.run(
                &["update-index", "--add", "--cacheinfo", &entry],
                &index_env,
                None,
            )?;
        }
        let tree = self.run(&["write-tree"], &index_env, None);
        let _ = std::fs::remove_file(&index);
        let tree = tree?;
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
        if let Some(parent) = &parent {
            args.extend(["-p", parent.as_str()]);
        }
        let sha = self.run(&args, &signature_env(author, author), None)?;
        self.move_branch(branch, &sha, parent.as_deref())?;
        Ok((parent, sha))
    }

    /// Moves `branch` to `new` if it still points at `old` (`None`: if it does not exist).
    pub fn move_branch(&self, branch: &str, new: &str, old: Option<&str>) -> Result<(), String> {
        let name = format!("refs/heads/{branch}");
        let zero = "0".repeat(40);
        self.run(&["update-ref", &name, new, old.unwrap_or(&zero)], &[], None)
            .map(|_| ())
    }

    pub fn delete_branch(&self, branch: &str) -> Result<(), String> {
        self.run(
            &["update-ref", "-d", &format!("refs/heads/{branch}")],
            &[],
            None,
        )
        .map(|_| ())
    }

    /// Merges `head` into the branch `base` (which points at `base_sha`) the way `style`
    /// says, with `message` for the commit it writes; the base is moved to the result.
    /// Returns the commit the base now points at.
    pub fn merge(
        &self,
        base: &str,
        base_sha: &str,
        head_sha: &str,
        style: Style,
        message: &str,
        committer: &Signature<'_>,
    ) -> Result<String, MergeError> {
        let contains_base = self.is_ancestor(base_sha, head_sha);
        let result = match style {
            Style::Merge => {
                let tree = self.merged_tree(None, base_sha, head_sha)?;
                self.write_commit(&tree, &[base_sha, head_sha], message, committer, None)?
            }
            Style::Squash => {
                let tree = self.merged_tree(None, base_sha, head_sha)?;
                self.write_commit(&tree, &[base_sha], message, committer, None)?
            }
            Style::FastForwardOnly | Style::RebaseOrFastForward if contains_base => {
                head_sha.to_string()
            }
            Style::FastForwardOnly => return Err(MergeError::NotFastForward),
            Style::Rebase | Style::RebaseOrFastForward => {
                self.replay(base_sha, head_sha, committer)?
            }
        };
        self.move_branch(base, &result, Some(base_sha))
            .map_err(|_| MergeError::BaseMoved)?;
        Ok(result)
    }

    /// The head's own commits (merges left out) written again, in order, on the base.
    fn replay(
        &self,
        base_sha: &str,
        head_sha: &str,
        committer: &Signature<'_>,
    ) -> Result<String, MergeError> {
        let range = format!("{base_sha}..{head_sha}");
        let list = self
            .run(&["rev-list", "--reverse", "--no-merges", &range], &[], None)
            .map_err(MergeError::Git)?;
        let mut onto = base_sha.to_string();
        for commit in list.lines() {
            let parent = self
                .run(&["rev-parse", &format!("{commit}^")], &[], None)
                .ok();
            let tree = self.merged_tree(parent.as_deref(), &onto, commit)?;
            let shown = self
                .run(
                    &["log", "-1", "--format=%an%x00%ae%x00%ad%x00%B", commit],
                    &[],
                    None,
                )
                .map_err(MergeError::Git)?;
            let mut parts = shown.splitn(4, '\0');
            let (name, email, date, body) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            let author = Signature { name, email };
            onto = self.write_commit(&tree, &[&onto], body, committer, Some((&author, date)))?;
        }
        Ok(onto)
    }

    /// The tree of merging `theirs` into `ours` (from `base` when given, else from their
    /// merge base); a conflict is an error.
    fn merged_tree(
        &self,
        base: Option<&str>,
        ours: &str,
        theirs: &str,
    ) -> Result<String, MergeError> {
        let merge_base = base.map(|b| format!("--merge-base={b}"));
        let mut args = vec!["merge-tree", "--write-tree", "--no-messages"];
        if let Some(flag) = &merge_base {
            args.push(flag);
        }
        args.extend([ours, theirs]);
        let out = self
            .command()
            .args(&args)
            .output()
            .map_err(|e| MergeError::Git(e.to_string()))?;
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()),
            Some(1) => Err(MergeError::Conflict),
            _ => Err(MergeError::Git(
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )),
        }
    }

    fn write_commit(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        committer: &Signature<'_>,
        author: Option<(&Signature<'_>, &str)>,
    ) -> Result<String, MergeError> {
        let mut args = vec!["commit-tree", tree];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        let mut env = signature_env(author.map_or(committer, |(a, _)| a), committer);
        if let Some((_, date)) = author {
            env.push(("GIT_AUTHOR_DATE", date));
        }
        self.run(&args, &env, Some(message.as_bytes()))
            .map_err(MergeError::Git)
    }

    /// git with no configuration but the repository's own, in the repository.
    pub fn command(&self) -> Command {
        let mut command = self.isolated();
        command.env("GIT_DIR", &self.path);
        command
    }

    /// git with nobody's configuration, no prompts, nothing on stdin.
    fn isolated(&self) -> Command {
        let mut command = Command::new("git");
        command
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null());
        command
    }

    /// Runs git in the repository; its stdout, trimmed, or its stderr when it fails.
    /// The messages of the commits `base..head`, oldest first, as GitHub lists them in a
    /// squash commit's default message (`* subject`, its body below).
    pub fn squashed_messages(&self, base: &str, head: &str) -> String {
        self.run(
            &[
                "log",
                "--reverse",
                "--format=* %B",
                &format!("{base}..{head}"),
            ],
            &[],
            None,
        )
        .unwrap_or_default()
    }

    fn run(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: Option<&[u8]>,
    ) -> Result<String, String> {
        let mut command = self.command();
        command.args(args).envs(env.iter().copied());
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command.spawn().map_err(|e| e.to_string())?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input).map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

fn signature_env<'a>(
    author: &Signature<'a>,
    committer: &Signature<'a>,
) -> Vec<(&'static str, &'a str)> {
    vec![
        ("GIT_AUTHOR_NAME", author.name),
        ("GIT_AUTHOR_EMAIL", author.email),
        ("GIT_COMMITTER_NAME", committer.name),
        ("GIT_COMMITTER_EMAIL", committer.email),
    ]
}
